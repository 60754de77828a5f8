package mcpserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/mcpserver"
	"github.com/ctxd/ctxd/mcpserver/mcptest"
	"github.com/ctxd/ctxd/memory"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixture is a real service (memorytest: bbolt, Bleve, GloVe, tiktoken in
// a temp dir) with a session "trip" compacted past its window, so it holds
// messages in every state, and an MCP client connected to the tools over
// the SDK's in-memory transport.
type fixture struct {
	h    *memorytest.Harness
	cs   *mcp.ClientSession
	cold string // a summarized or dropped message of "trip"
	ids  []string
}

// The backends a fixture can serve the tools over.
const (
	inProcess = "ServiceBackend"
	overHTTP  = "ClientBackend"
)

// eachBackend runs test on a fresh fixture of each backend: the tools must
// answer the same in the server process and as a client of a server.
func eachBackend(t *testing.T, test func(t *testing.T, f *fixture)) {
	for _, kind := range []string{inProcess, overHTTP} {
		t.Run(kind, func(t *testing.T) { test(t, newFixture(t, kind)) })
	}
}

func newFixture(t *testing.T, kind string) *fixture {
	t.Helper()
	h := memorytest.Open(t)
	ctx := memory.NewContextWithTenant(context.Background(), "t1")
	f := &fixture{h: h}
	window := 2000
	if _, err := h.PutSession(ctx, "trip", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		role := memory.RoleUser
		if i%2 == 1 {
			role = memory.RoleAssistant
		}
		content := fmt.Sprintf("turn %d: the train ran late, so we walked along the river and talked about film %d", i, i*7)
		if i == 3 {
			content = "turn 3: the hotel in Lisbon is called Casa Azul and the booking code is QX-4471"
		}
		res, err := h.Append(ctx, "trip", []*memory.Message{{Role: role, Content: content}})
		if err != nil {
			t.Fatal(err)
		}
		f.ids = append(f.ids, res.IDs...)
	}
	if err := h.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	cold, _, err := h.ListMessages(ctx, "trip", []string{"dropped", "summarized"}, "", 1)
	if err != nil || len(cold) == 0 {
		t.Fatalf("no cold message in trip after 60 turns (%v)", err)
	}
	f.cold = cold[0].ID
	f.cs = connect(t, backend(t, h.Service, kind, "t1"))
	return f
}

// backend is a backend of kind acting as tenant: ClientBackend reaches
// svc through httpapi on 127.0.0.1:0, with an API key of that tenant.
func backend(t *testing.T, svc *memory.Service, kind, tenant string) mcpserver.Backend {
	t.Helper()
	if kind == inProcess {
		return &mcpserver.ServiceBackend{Service: svc, Tenant: tenant}
	}
	const secret = "key-of-the-mcp-tests-0123456789"
	key, err := httpapi.NewKey(tenant, secret, "", false)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{Logger: slog.New(slog.DiscardHandler), Keys: []httpapi.Key{key}}).Handler())
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithAPIKey(secret))
	if err != nil {
		t.Fatal(err)
	}
	return &mcpserver.ClientBackend{Client: c}
}

// connect serves the tools over b and returns a connected SDK client.
func connect(t *testing.T, b mcpserver.Backend) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	srv := mcpserver.New(b, mcpserver.Options{Logger: slog.New(slog.DiscardHandler)})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

// mustCall and mustFail are mcptest's, named for these tests.
var (
	mustCall = mcptest.OK
	mustFail = mcptest.Fails
)

func ids(list any) []string {
	var out []string
	for _, m := range list.([]any) {
		out = append(out, m.(map[string]any)["id"].(string))
	}
	return out
}
