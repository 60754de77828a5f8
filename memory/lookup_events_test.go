package memory_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxd/ctxd/eventlog"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
)

func tenantCtx(tenant string) context.Context {
	return memory.NewContextWithTenant(context.Background(), tenant)
}

func TestMessageByIDIsScopedToTheTenant(t *testing.T) {
	t.Parallel()
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "ctxd.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m := &memory.Message{ID: "m-1", Role: memory.RoleUser, Content: "the repo is at /srv/bluefin", Tokens: 9,
		State: memory.StateDropped, CreatedAt: time.Unix(1000, 0).UTC()}
	create := func() *memory.Session {
		return &memory.Session{Tenant: "t1", ID: "s1", ContextWindow: 1000, Encoding: memory.EncodingO200k}
	}
	if _, err := store.Append(context.Background(), "t1", "s1", create, []*memory.Message{m}); err != nil {
		t.Fatal(err)
	}
	svc := &memory.Service{Store: store}

	t.Run("OK", func(t *testing.T) {
		got, err := svc.Message(tenantCtx("t1"), "m-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.SessionID != "s1" || got.Content != m.Content || got.State != memory.StateDropped {
			t.Fatalf("Message = %+v", got)
		}
	})
	t.Run("ENOTFOUND other tenant", func(t *testing.T) {
		if _, err := svc.Message(tenantCtx("t2"), "m-1"); memory.ErrorCode(err) != memory.ENOTFOUND {
			t.Fatalf("another tenant's message: err = %v, want not_found", err)
		}
	})
	t.Run("ENOTFOUND missing", func(t *testing.T) {
		if _, err := svc.Message(tenantCtx("t1"), "m-2"); memory.ErrorCode(err) != memory.ENOTFOUND {
			t.Fatalf("missing message: err = %v, want not_found", err)
		}
	})
	t.Run("EINVALID empty", func(t *testing.T) {
		if _, err := svc.Message(tenantCtx("t1"), ""); memory.ErrorCode(err) != memory.EINVALID {
			t.Fatalf("empty id: err = %v, want invalid_request", err)
		}
	})
}

func TestTailEventsSeesOnlyTheCallersTenant(t *testing.T) {
	t.Parallel()
	log, err := eventlog.Open(t.TempDir(), eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	for i := range 6 {
		tenant := []string{"t1", "t2"}[i%2]
		session := []string{"a", "b", "c"}[i%3]
		if err := log.Log("drops", map[string]any{"tenant": tenant, "session": session, "chunk": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Log("context-health", map[string]any{"tenant": "t1", "session": "a", "tokens": 7}); err != nil {
		t.Fatal(err)
	}
	svc := &memory.Service{EventReader: log}
	chunks := func(evs []map[string]any) string {
		var s string
		for _, e := range evs {
			s += fmt.Sprint(e["chunk"], " ")
		}
		return s
	}

	t.Run("OK", func(t *testing.T) {
		evs, err := svc.TailEvents(tenantCtx("t1"), memory.EventQuery{Stream: "drops"})
		if err != nil {
			t.Fatal(err)
		}
		if got := chunks(evs); got != "0 2 4 " {
			t.Fatalf("t1's drops = %q, want 0 2 4 oldest first", got)
		}
	})
	t.Run("session and n", func(t *testing.T) {
		evs, err := svc.TailEvents(tenantCtx("t2"), memory.EventQuery{Stream: "drops", SessionID: "c", N: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := chunks(evs); got != "5 " {
			t.Fatalf("t2's last drop of c = %q, want 5", got)
		}
	})
	t.Run("health reads context-health", func(t *testing.T) {
		evs, err := svc.TailEvents(tenantCtx("t1"), memory.EventQuery{Stream: "health"})
		if err != nil || len(evs) != 1 || fmt.Sprint(evs[0]["tokens"]) != "7" {
			t.Fatalf("health = %v, %v", evs, err)
		}
		if evs, _ := svc.TailEvents(tenantCtx("t2"), memory.EventQuery{Stream: "health"}); len(evs) != 0 {
			t.Fatalf("t2 sees t1's health events: %v", evs)
		}
	})
	for name, q := range map[string]memory.EventQuery{
		"EINVALID stream":  {Stream: "secrets"},
		"EINVALID n":       {Stream: "drops", N: memory.MaxEventCount + 1},
		"EINVALID n<0":     {Stream: "drops", N: -1},
		"EINVALID session": {Stream: "drops", SessionID: "../x"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := svc.TailEvents(tenantCtx("t1"), q); memory.ErrorCode(err) != memory.EINVALID {
				t.Fatalf("err = %v, want invalid_request", err)
			}
		})
	}
	t.Run("EUNAVAILABLE without a log", func(t *testing.T) {
		if _, err := (&memory.Service{}).TailEvents(tenantCtx("t1"), memory.EventQuery{Stream: "drops"}); memory.ErrorCode(err) != memory.EUNAVAILABLE {
			t.Fatalf("err = %v, want unavailable", err)
		}
	})
}
