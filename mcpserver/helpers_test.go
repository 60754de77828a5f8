package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/mcpserver"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/memorytest"
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

func newFixture(t *testing.T) *fixture {
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
	f.cs = connect(t, &mcpserver.ServiceBackend{Service: h.Service, Tenant: "t1"})
	return f
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

// result is a tool's answer: its structured output, or its error text.
type result struct {
	out    map[string]any
	errMsg string
}

// code is the error code a failed call's text starts with.
func (r result) code() string {
	code, _, _ := strings.Cut(r.errMsg, ": ")
	return code
}

// call calls a tool; a protocol error (not a tool error) fails the test.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) result {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error %v", tool, args, err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		if res.StructuredContent != nil {
			t.Errorf("%s: an error with structured content %v", tool, res.StructuredContent)
		}
		return result{errMsg: text}
	}
	var out map[string]any
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", tool, raw, err)
	}
	// The text is the same answer, for clients that read only text.
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text), &fromText); err != nil || fmt.Sprint(fromText) != fmt.Sprint(out) {
		t.Errorf("%s: text content %q is not the structured answer (%v)", tool, text, err)
	}
	return result{out: out}
}

// mustCall calls a tool that must succeed.
func mustCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t.Helper()
	r := call(t, cs, tool, args)
	if r.errMsg != "" {
		t.Fatalf("%s %v: %s", tool, args, r.errMsg)
	}
	return r.out
}

// mustFail calls a tool that must fail with code.
func mustFail(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, code string) string {
	t.Helper()
	r := call(t, cs, tool, args)
	if r.errMsg == "" {
		t.Fatalf("%s %v succeeded: %v; want %s", tool, args, r.out, code)
	}
	if r.code() != code {
		t.Fatalf("%s %v: %q; want code %s", tool, args, r.errMsg, code)
	}
	return r.errMsg
}

func ids(list any) []string {
	var out []string
	for _, m := range list.([]any) {
		out = append(out, m.(map[string]any)["id"].(string))
	}
	return out
}
