package memory_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/coldstore"
	"github.com/ctxd/ctxd/index/glove"
	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
	"github.com/ctxd/ctxd/summarize"
	"github.com/ctxd/ctxd/tokenizer"
)

// clock is a settable time for a Service: tests move it, never sleep.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// openService opens a Service on real adapters (bbolt, Bleve, GloVe,
// tiktoken, extractive summaries, the cold mirror) in a temp dir; wrap may
// wrap the bbolt store. Cleanup closes everything and checks the file.
func openService(t *testing.T, clk *clock, wrap func(*boltstore.Store) memory.Store) (*memory.Service, *boltstore.Store) {
	t.Helper()
	st, idx, cold := memorytest.Adapters(t, t.TempDir())
	emb, err := glove.Default()
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenizer.New()
	var store memory.Store = st
	if wrap != nil {
		store = wrap(st)
	}
	svc := &memory.Service{Store: store, Index: idx, Embedder: emb, Tokenizer: tok, Summarizer: summarize.NewExtractive(tok, emb),
		Cold: coldstore.Mirror{Store: cold}, Logger: slog.New(slog.DiscardHandler), Now: clk.Now}
	if err := svc.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() }) // before Adapters' cleanup closes them
	return svc, st
}

// blindStore misses every earlier write in the lookups made before a write
// is prepared, as when a copy of the write commits between that lookup and
// the write's own transaction: the transaction must catch it.
type blindStore struct{ *boltstore.Store }

func (blindStore) WriteKey(context.Context, string, string, string) (*memory.WriteRecord, error) {
	return nil, nil
}

func (blindStore) MessagesByClientID(context.Context, string, string, []string) (map[string]*memory.Message, error) {
	return nil, nil
}

func userMsgs(texts ...string) []*memory.Message {
	var out []*memory.Message
	for _, s := range texts {
		out = append(out, &memory.Message{Role: memory.RoleUser, Content: s})
	}
	return out
}

func TestIdempotentWriteDecidedInTheTransaction(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	svc, _ := openService(t, clk, func(st *boltstore.Store) memory.Store { return blindStore{st} })
	ctx := context.Background()
	key := memory.AppendOptions{IdempotencyKey: "k"}
	first, err := svc.AppendWith(ctx, "s", userMsgs("one", "two"), key)
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.AppendWith(ctx, "s", userMsgs("one", "two"), key)
	if err != nil || !again.Replayed || !slices.Equal(again.IDs, first.IDs) || !slices.Equal(again.Tokens, first.Tokens) {
		t.Fatalf("retry = %+v, %v; first %+v", again, err, first)
	}
	if _, err := svc.AppendWith(ctx, "s", userMsgs("other"), key); memory.ErrorCode(err) != memory.ECONFLICT {
		t.Fatalf("same key, other messages: %v", err)
	}

	withID := func(id, text string) *memory.Message {
		return &memory.Message{Role: memory.RoleUser, Content: text, ClientID: id}
	}
	a, err := svc.AppendWith(ctx, "s", []*memory.Message{withID("c1", "three")}, memory.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.AppendWith(ctx, "s", []*memory.Message{withID("c1", "three"), withID("c2", "four")}, memory.AppendOptions{})
	if err != nil || b.IDs[0] != a.IDs[0] || b.Tokens[0] != a.Tokens[0] || b.IDs[1] == a.IDs[0] {
		t.Fatalf("known client id = %+v, %v", b, err)
	}
	msgs, _, err := svc.ListMessages(ctx, "s", []string{"all"}, "", 0)
	if err != nil || len(msgs) != 4 {
		t.Fatalf("%d messages stored (%v), want 4", len(msgs), err)
	}
}

// Keys are forgotten after WriteKeyTTL: the same key then stores anew.
func TestWriteKeysExpire(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	svc, _ := openService(t, clk, nil)
	ctx := context.Background()
	key := memory.AppendOptions{IdempotencyKey: "daily"}
	first, err := svc.AppendWith(ctx, "s", userMsgs("report"), key)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(memory.WriteKeyTTL - time.Minute)
	if r, err := svc.AppendWith(ctx, "s", userMsgs("report"), key); err != nil || !r.Replayed {
		t.Fatalf("within the TTL: %+v, %v", r, err)
	}
	clk.Add(2 * time.Minute)
	r, err := svc.AppendWith(ctx, "s", userMsgs("report"), key)
	if err != nil || r.Replayed || r.IDs[0] == first.IDs[0] {
		t.Fatalf("past the TTL: %+v, %v", r, err)
	}
	// and the new record answers from then on
	if again, err := svc.AppendWith(ctx, "s", userMsgs("report"), key); err != nil || again.IDs[0] != r.IDs[0] {
		t.Fatalf("retry of the new write: %+v, %v", again, err)
	}
}

// A session stored before pinned totals were kept has none: the first
// write that needs it counts it from the messages, and the store keeps it
// exact from then on.
func TestPinnedTotalOfAnOlderSession(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	svc, st := openService(t, clk, nil)
	ctx := context.Background()
	window := 1000
	if _, err := svc.PutSession(ctx, "old", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	sys := &memory.Message{Role: memory.RoleSystem, Content: "You are a release assistant for the Bluefin project."}
	note := &memory.Message{Role: memory.RoleAssistant, Content: "NOTE: the freeze starts Monday.", Pinned: true}
	if _, err := svc.Append(ctx, "old", []*memory.Message{sys, note, {Role: memory.RoleUser, Content: "hello"}}); err != nil {
		t.Fatal(err)
	}
	want := sys.Tokens + note.Tokens
	if _, err := st.UpdateSession(ctx, memory.DefaultTenant, "old", nil, func(s *memory.Session) error {
		if s.PinnedTokens == nil || *s.PinnedTokens != want {
			return fmt.Errorf("pinned total %v, want %d", s.PinnedTokens, want)
		}
		s.PinnedTokens = nil // as an older ctxd stored it
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Unpinned writes leave it unknown; the first pinned one counts it.
	if _, err := svc.Append(ctx, "old", userMsgs("more")); err != nil {
		t.Fatal(err)
	}
	more := &memory.Message{Role: memory.RoleAssistant, Content: "NOTE: ship on Tuesday.", Pinned: true}
	if _, err := svc.Append(ctx, "old", []*memory.Message{more}); err != nil {
		t.Fatal(err)
	}
	sess, err := st.Session(ctx, memory.DefaultTenant, "old")
	if err != nil || sess.PinnedTokens == nil || *sess.PinnedTokens != want+more.Tokens {
		t.Fatalf("pinned total after the first pinned write: %v (%v), want %d", sess.PinnedTokens, err, want+more.Tokens)
	}
	// An unpin and a delete are accounted for in their own transactions.
	if _, err := svc.EditMessage(ctx, note.ID, memory.MessageEdit{Pinned: new(false)}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.DeleteMessage(ctx, more.ID, false); err != nil {
		t.Fatal(err)
	}
	if sess, _ = st.Session(ctx, memory.DefaultTenant, "old"); *sess.PinnedTokens != sys.Tokens {
		t.Fatalf("pinned total after unpin and delete: %d, want %d", *sess.PinnedTokens, sys.Tokens)
	}
}

// Earlier versions expire with the session's cold chunks: the purge
// deletes them and the edited message stops listing them.
// storeEdited stores a message in session "s" and edits it once: the
// earlier version is cold, with the default retention.
func storeEdited(t *testing.T, svc *memory.Service) (string, *memory.EditResult) {
	t.Helper()
	ctx := context.Background()
	res, err := svc.Append(ctx, "s", userMsgs("the deploy key lives in vault path secret/deploy"))
	if err != nil {
		t.Fatal(err)
	}
	edit, err := svc.EditMessage(ctx, res.IDs[0], memory.MessageEdit{Content: new("the deploy key lives in vault path secret/ci")})
	if err != nil || edit.Previous == nil || !slices.Equal(edit.Message.Versions, []string{edit.Previous.ID}) {
		t.Fatalf("edit = %+v, %v", edit, err)
	}
	return res.IDs[0], edit
}

func TestPurgeForgetsEarlierVersions(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	svc, _ := openService(t, clk, nil)
	ctx := context.Background()
	id, edit := storeEdited(t, svc)
	if edit.Previous.Cold.RecoverableUntil != clk.Now().AddDate(0, 0, memory.DefaultPolicy.RecoverableForDays) {
		t.Fatalf("earlier version recoverable until %v", edit.Previous.Cold.RecoverableUntil)
	}
	clk.Add(29 * 24 * time.Hour)
	if n, err := svc.Purge(ctx, clk.Now()); err != nil || n != 0 {
		t.Fatalf("purge before the deadline: %d, %v", n, err)
	}
	clk.Add(2 * 24 * time.Hour)
	if n, err := svc.Purge(ctx, clk.Now()); err != nil || n != 1 {
		t.Fatalf("purge after the deadline: %d, %v", n, err)
	}
	m, err := svc.Message(ctx, id)
	if err != nil || len(m.Versions) != 0 || m.Content != "the deploy key lives in vault path secret/ci" {
		t.Fatalf("edited message after the purge = %+v, %v", m, err)
	}
	if _, err := svc.Message(ctx, edit.Previous.ID); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("purged version: %v", err)
	}
}

// Deleting a summary leaves its sources cold as dropped (reason
// summary_deleted), not summarized by a message that is gone; the
// harness's Cleanup checks every summarized original has its live summary.
func TestDeleteSummaryReleasesItsSources(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	window := 2000
	if _, err := h.PutSession(ctx, "s", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	var batch []*memory.Message
	for i := range 40 {
		batch = append(batch, &memory.Message{Role: []memory.Role{memory.RoleUser, memory.RoleAssistant}[i%2],
			Content: fmt.Sprintf("Turn %d: we talked about the deployment of service_%d to region eu-west-%d and its rollback plan.", i, i, i%3)})
	}
	if _, err := h.Append(ctx, "s", batch); err != nil {
		t.Fatal(err)
	}
	rep, err := h.Compact(ctx, "s", memory.CompactRequest{Trigger: memory.TriggerManual})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Summaries) != 1 || len(rep.Summarized) == 0 {
		t.Fatalf("setup: compaction wrote summaries %v of %d messages", rep.Summaries, len(rep.Summarized))
	}
	if _, err := h.DeleteMessage(ctx, rep.Summaries[0], false); err != nil {
		t.Fatal(err)
	}
	for _, id := range rep.Summarized {
		m, err := h.Message(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if m.State != memory.StateDropped || m.Cold == nil || m.Cold.SummaryID != "" || m.Cold.DropReason != memory.ReasonSummaryDeleted {
			t.Fatalf("source %s after its summary was deleted: state %s, cold %+v", id, m.State, m.Cold)
		}
	}
}
