package server_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/index/glove"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/pgstore"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
	"github.com/ctxd/ctxd/summarize"
	"github.com/ctxd/ctxd/tokenizer"
)

// meeting holds the first reader of a session's messages until a second
// one comes (or a second has passed): two gateway calls that both read the
// session before either stores anything, the race a lock must prevent.
type meeting struct {
	mu      sync.Mutex
	arrived int
	both    chan struct{}
}

func (m *meeting) arrive() {
	m.mu.Lock()
	m.arrived++
	n := m.arrived
	m.mu.Unlock()
	switch n {
	case 1:
		select {
		case <-m.both:
		case <-time.After(time.Second): // the other is held by the lock
		}
	case 2:
		close(m.both)
	}
}

// meetingStore is a node's store whose readers of the session's messages
// meet first.
type meetingStore struct {
	*pgstore.Store
	m *meeting
}

func (s meetingStore) Messages(ctx context.Context, tenant, id string, q memory.MessageQuery) ([]*memory.Message, error) {
	s.m.arrive()
	return s.Store.Messages(ctx, tenant, id, q)
}

// gatewayNode is a node's gateway on the database dsn: its own connections,
// index and service, its reads of messages meeting the other node's.
func gatewayNode(t *testing.T, dsn string, m *meeting) *memory.Gateway {
	t.Helper()
	return memory.NewGateway(serviceNode(t, dsn, func(st *pgstore.Store) memory.Store { return meetingStore{st, m} }))
}

// serviceNode is a node's service on the database dsn, with its own
// connections and index; wrap (optional) stands between it and the store.
func serviceNode(t *testing.T, dsn string, wrap func(*pgstore.Store) memory.Store) *memory.Service {
	t.Helper()
	ctx := context.Background()
	st, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := index.Open(filepath.Join(t.TempDir(), "index"), index.Options{Texts: st})
	if err != nil {
		t.Fatal(err)
	}
	emb, err := glove.Default()
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenizer.New()
	var store memory.Store = st
	if wrap != nil {
		store = wrap(st)
	}
	svc := &memory.Service{Store: store, Index: idx, Embedder: emb, Tokenizer: tok,
		Summarizer: summarize.NewExtractive(tok, emb), SharedStore: true, Now: servertest.Clock(servertest.Epoch)}
	if err := svc.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = svc.Wait(ctx)
		svc.Close()
		idx.Close()
		st.Close()
	})
	return svc
}

// Two calls of one gateway session at once on two nodes take turns through
// the database (a row lock, no advisory lock): the second matches the
// history the first stored and stores nothing again. Each node's own lock
// serialized only its own calls: both read the session empty and both
// stored the history, which then stood twice in every window.
func TestGatewayCallsOfOneSessionTakeTurnsAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	m := &meeting{both: make(chan struct{})}
	a, b := gatewayNode(t, dsn, m), gatewayNode(t, dsn, m)
	ctx := memory.NewContextWithTenant(context.Background(), memory.DefaultTenant)
	req := memory.GatewayRequest{Session: "shared", ContextWindow: 8000, Reserve: 500, History: []*memory.Message{
		{Role: memory.RoleSystem, Content: "You are a careful assistant."},
		{Role: memory.RoleUser, Content: "when does the last ferry to the island leave?"},
	}}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, g := range []*memory.Gateway{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = g.Prepare(ctx, req)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the calls: %v, %v", errs[0], errs[1])
	}
	st, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stored, err := st.Messages(ctx, memory.DefaultTenant, "shared", memory.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 {
		for _, s := range stored {
			t.Logf("stored %s %s %q", s.ID, s.Role, s.Content)
		}
		t.Fatalf("the session holds %d messages after two calls with the same history of 2", len(stored))
	}
}
