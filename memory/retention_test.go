package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// Retention holds at start and when a cold message is recovered, not only
// after a purge interval of uptime (an hour by default): a server
// restarted more often never purged, and expired originals stayed readable
// and recoverable.
func TestRetentionAtStartAndRecover(t *testing.T) {
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
