package main

import (
	"fmt"
	"testing"
)

func TestGetMessageByID(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ids := ts.store("lookup", msg("user", "The staging DB password rotates every Friday."))

	t.Run("OK", func(t *testing.T) {
		m := ts.mustDo(200, "GET", "/v1/messages/"+ids[0], nil)
		if m["id"] != ids[0] || m["session_id"] != "lookup" || m["state"] != "active" ||
			m["content"] != "The staging DB password rotates every Friday." || m["tokens"].(float64) <= 0 {
			t.Fatalf("GET message = %v", m)
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		r := ts.do("GET", "/v1/messages/01NOSUCHMESSAGE", nil)
		if r.Status != 404 || r.errCode() != "not_found" {
			t.Fatalf("missing message = %d %s", r.Status, r.Raw)
		}
	})
}

func TestListEvents(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.store("ev-a", msg("user", "first"))
	ts.store("ev-a", msg("user", "second"))
	ts.store("ev-b", msg("user", "third"))

	t.Run("OK", func(t *testing.T) {
		body := ts.mustDo(200, "GET", "/v1/events/health?session_id=ev-a", nil)
		evs := body["events"].([]any)
		if len(evs) != 2 {
			t.Fatalf("health events of ev-a = %v, want 2", evs)
		}
		for _, e := range evs {
			e := e.(map[string]any)
			if e["session"] != "ev-a" || e["tenant"] != "default" || e["time"] == nil {
				t.Fatalf("event = %v", e)
			}
		}
		if first, last := evs[0].(map[string]any), evs[1].(map[string]any); first["tokens"].(float64) >= last["tokens"].(float64) {
			t.Fatalf("events not oldest first: %v then %v", first, last)
		}
	})
	t.Run("n", func(t *testing.T) {
		body := ts.mustDo(200, "GET", "/v1/events/health?n=1", nil)
		evs := body["events"].([]any)
		if len(evs) != 1 || evs[0].(map[string]any)["session"] != "ev-b" {
			t.Fatalf("last health event = %v, want ev-b's", evs)
		}
	})
	t.Run("empty stream", func(t *testing.T) {
		body := ts.mustDo(200, "GET", "/v1/events/compaction", nil)
		if evs, ok := body["events"].([]any); !ok || len(evs) != 0 {
			t.Fatalf("compaction events = %v, want []", body)
		}
	})
	for _, q := range []string{"/v1/events/secrets", "/v1/events/drops?n=abc", "/v1/events/drops?n=-1",
		"/v1/events/drops?n=1001", "/v1/events/drops?session_id=.bad"} {
		t.Run(fmt.Sprint("invalid ", q), func(t *testing.T) {
			if r := ts.do("GET", q, nil); r.Status != 400 || r.errCode() != "invalid_request" {
				t.Fatalf("GET %s = %d %s, want 400 invalid_request", q, r.Status, r.Raw)
			}
		})
	}
}
