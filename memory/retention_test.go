package memory_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// Retention holds at start and when a cold message is recovered, not only
// after a purge interval of uptime (an hour by default): a server
// restarted more often never purged, and expired originals stayed readable
// and recoverable.
func TestRetentionAtStartAndRecover(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	svc, _ := openService(t, clk, nil)
	ctx := context.Background()
	id, first := storeEdited(t, svc)
	clk.Add(time.Duration(memory.DefaultPolicy.RecoverableForDays+1) * 24 * time.Hour)

	// A restart: a second service on the same store purges as it opens.
	svc.Close()
	again := &memory.Service{Store: svc.Store, Index: svc.Index, Embedder: svc.Embedder, Tokenizer: svc.Tokenizer,
		Summarizer: svc.Summarizer, Cold: svc.Cold, Logger: svc.Logger, Now: clk.Now}
	if err := again.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	if _, err := again.Message(ctx, first.Previous.ID); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("an expired earlier version after a restart: %v, want not found", err)
	}

	second, err := again.EditMessage(ctx, id, memory.MessageEdit{Content: new("the deploy key lives in vault path secret/cd")})
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Duration(memory.DefaultPolicy.RecoverableForDays+1) * 24 * time.Hour)
	if m, err := again.Recover(ctx, "s", second.Previous.ID, "", 0); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("recovering an expired earlier version: %+v, %v; want not found", m, err)
	}
}

// Expiry holds at read time, before any purge has run: a cold chunk past
// its retention is not found by id, not listed, not searched and not
// recovered, though the store still holds it until the next purge.
func TestExpiredIsUnreadableBeforeThePurge(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	svc, st := openService(t, clk, nil)
	ctx := context.Background()
	_, edit := storeEdited(t, svc)
	old := edit.Previous.ID
	found := func() (byID, listed, searched bool) {
		_, err := svc.Message(ctx, old)
		byID = err == nil
		cold, _, err := svc.ListCold(ctx, "s", "", 100, false)
		if err != nil {
			t.Fatal(err)
		}
		all, _, err := svc.ListMessages(ctx, "s", []string{"all"}, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		listed = slices.ContainsFunc(append(cold, all...), func(m *memory.Message) bool { return m.ID == old })
		res, err := svc.Search(ctx, memory.SearchRequest{Query: "vault path secret deploy", K: 10, States: []memory.State{memory.StateDropped, memory.StateSummarized}})
		if err != nil {
			t.Fatal(err)
		}
		searched = slices.ContainsFunc(res, func(r memory.SearchResult) bool { return r.Message.ID == old })
		return
	}
	if byID, listed, searched := found(); !byID || !listed || !searched {
		t.Fatalf("within retention: by id %v, listed %v, searched %v; want all", byID, listed, searched)
	}
	clk.Add(time.Duration(memory.DefaultPolicy.RecoverableForDays)*24*time.Hour + time.Second)
	if byID, listed, searched := found(); byID || listed || searched {
		t.Fatalf("past retention, before a purge: by id %v, listed %v, searched %v; want none", byID, listed, searched)
	}
	if msgs, err := st.MessagesByID(ctx, memory.DefaultTenant, []string{old}, false); err != nil || len(msgs) != 1 {
		t.Fatalf("the store no longer holds it (%d, %v): the test no longer tests reads before the purge", len(msgs), err)
	}
	if _, err := svc.Recover(ctx, "s", old, "", 0); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("recover past retention: %v, want not found", err)
	}
}
