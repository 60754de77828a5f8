// Package memorytest opens a memory.Service on the real adapters (bbolt,
// Bleve, the embedded word vectors, the exact tokenizer, the extractive
// summarizer, the cold mirror) in a test's temp dir, with a clock the test
// moves, and checks the service's invariants when the test ends.
package memorytest

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/coldstore"
	"github.com/ctxd/ctxd/eventlog"
	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/index/glove"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
	"github.com/ctxd/ctxd/summarize"
	"github.com/ctxd/ctxd/tokenizer"
)

// Clock is a fake clock: it moves only when told.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock on.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Harness is an open service and its adapters.
type Harness struct {
	*memory.Service
	Store *boltstore.Store
	Index *index.Index
	Cold  *coldstore.Store
	Clock *Clock
	Dir   string
}

// Open opens a service in tb.TempDir(); configure may set fields (policy,
// limits, defaults) before it opens. Cleanup waits for background work,
// checks the invariants (Check) and closes everything.
func Open(tb testing.TB, configure ...func(*memory.Service)) *Harness {
	tb.Helper()
	dir := tb.TempDir()
	st, err := boltstore.Open(filepath.Join(dir, "ctxd.db"), false)
	if err != nil {
		tb.Fatal(err)
	}
	// Texts as the server sets it, so searches come with highlights.
	idx, err := index.Open(filepath.Join(dir, "index"), index.Options{Texts: st})
	if err != nil {
		tb.Fatal(err)
	}
	cold, err := coldstore.Open(filepath.Join(dir, "cold"))
	if err != nil {
		tb.Fatal(err)
	}
	emb, err := glove.Default()
	if err != nil {
		tb.Fatal(err)
	}
	tok := tokenizer.New()
	clock := &Clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h := &Harness{Store: st, Index: idx, Cold: cold, Clock: clock, Dir: dir}
	h.Service = &memory.Service{Store: st, Index: idx, Embedder: emb, Tokenizer: tok,
		Summarizer: summarize.NewExtractive(tok, emb), Cold: coldstore.Mirror{Store: cold}, Now: clock.Now}
	for _, f := range configure {
		f(h.Service)
	}
	if err := h.Service.Open(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := h.Wait(context.Background()); err != nil {
			tb.Error(err)
		}
		if err := h.Check(context.Background()); err != nil {
			tb.Error(err)
		}
		h.Service.Close()
		idx.Close()
		if err := st.Check(); err != nil {
			tb.Error(err)
		}
		st.Close()
	})
	return h
}

// Check verifies what must hold of every session whatever happened to it:
// the session's token total and counts are those of its messages; every
// summarized original is a source of exactly one live summary, the one its
// cold info names; no original is a source of two live summaries.
func (h *Harness) Check(ctx context.Context) error {
	tenants, err := h.Store.Tenants(ctx)
	if err != nil {
		return err
	}
	for _, tenant := range tenants {
		sessions, err := h.Store.Sessions(ctx, tenant, "", 0)
		if err != nil {
			return err
		}
		for _, sess := range sessions {
			if err := checkSession(ctx, h.Store, sess); err != nil {
				return fmt.Errorf("tenant %s session %s: %w", tenant, sess.ID, err)
			}
		}
	}
	return nil
}

func checkSession(ctx context.Context, st memory.Store, sess *memory.Session) error {
	msgs, err := st.Messages(ctx, sess.Tenant, sess.ID, memory.MessageQuery{})
	if err != nil {
		return err
	}
	tokens := 0
	var counts memory.Counts
	sourceOf := map[string]string{}
	for _, m := range msgs {
		counts.Add(m.State, 1)
		if m.InWindow() {
			tokens += m.Tokens
		}
		if m.IsSummary() && m.InWindow() {
			for _, id := range m.Sources {
				if other, dup := sourceOf[id]; dup {
					return fmt.Errorf("message %s is a source of two live summaries, %s and %s", id, other, m.ID)
				}
				sourceOf[id] = m.ID
			}
		}
	}
	if tokens != sess.Tokens {
		return fmt.Errorf("session tokens %d, its window's messages cost %d", sess.Tokens, tokens)
	}
	if counts != sess.Counts {
		return fmt.Errorf("session counts %+v, its messages' %+v", sess.Counts, counts)
	}
	for _, m := range msgs {
		if m.State != memory.StateSummarized {
			continue
		}
		if m.Cold == nil || sourceOf[m.ID] == "" || sourceOf[m.ID] != m.Cold.SummaryID {
			return fmt.Errorf("summarized message %s: live summary %q lists it, its cold info names %v", m.ID, sourceOf[m.ID], m.Cold)
		}
	}
	return nil
}

// WithEvents gives the service a real event log in a temp dir, which it
// also reads back (history, tuning, TailEvents).
func WithEvents(tb testing.TB) func(*memory.Service) {
	dir := tb.TempDir()
	return func(s *memory.Service) {
		// On the harness's clock (set before configure runs), as the
		// service's own times are.
		log, err := eventlog.Open(dir, eventlog.Options{Now: s.Now})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { log.Close() })
		s.Events, s.EventReader = log, log
	}
}

// Compacted fills session id (of ctx's tenant) past its compaction trigger
// (a 2,000-token window), one write a turn a minute apart, so it holds
// cold messages; the third turn, alone, names a zebrafish password
// manager, for prompts that should bring it back.
func (h *Harness) Compacted(tb testing.TB, ctx context.Context, id string) {
	tb.Helper()
	window := 2000
	if _, err := h.PutSession(ctx, id, memory.SessionUpdate{ContextWindow: &window}); err != nil {
		tb.Fatal(err)
	}
	for i := range 60 {
		text := fmt.Sprintf("turn %d: the train ran late, so we walked along the river and talked about film %d", i, i*7)
		if i == 2 {
			text = "turn 2: the password manager we chose is called zebrafish, keep its vault on the blue drive"
		}
		role := memory.RoleUser
		if i%2 == 1 {
			role = memory.RoleAssistant
		}
		h.Clock.Add(time.Minute)
		if _, err := h.Append(ctx, id, []*memory.Message{{Role: role, Content: text}}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := h.Wait(ctx); err != nil {
		tb.Fatal(err)
	}
}

// Node opens a second service on the harness's store and cold store, as
// another node sharing them would (SharedStore set), with an index of its
// own, new and empty, in a temp dir; configure may set fields before it
// opens. Closed when tb ends, before the harness.
func (h *Harness) Node(tb testing.TB, configure ...func(*memory.Service)) (*memory.Service, *index.Index) {
	tb.Helper()
	idx, err := index.Open(filepath.Join(tb.TempDir(), "index"), index.Options{Texts: h.Store})
	if err != nil {
		tb.Fatal(err)
	}
	s := &memory.Service{Store: h.Store, Index: idx, Embedder: h.Service.Embedder, Tokenizer: h.Service.Tokenizer,
		Summarizer: h.Service.Summarizer, Cold: h.Service.Cold, Now: h.Clock.Now, SharedStore: true}
	for _, f := range configure {
		f(s)
	}
	if err := s.Open(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Wait(context.Background()); err != nil {
			tb.Error(err)
		}
		s.Close()
		idx.Close()
	})
	return s, idx
}
