package mcpserver_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/mcpserver"
	"github.com/ctxd/ctxd/memory"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A generic client (the MCP inspector) renders a schema's integer as a
// number field only when its type is "integer", and sends a form's text as
// a string: max_tokens is typed so, and a string of digits is taken as the
// number it spells, where other strings are still refused.
func TestIntegerArgumentsAsStrings(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		tools, err := f.cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			if tool.Name != mcpserver.ToolContext {
				continue
			}
			schema := fmt.Sprint(tool.InputSchema)
			if !strings.Contains(schema, "max_tokens:map[description:") || !strings.Contains(schema, "type:integer") || strings.Contains(schema, "null") {
				t.Errorf("max_tokens schema: %s", schema)
			}
		}
		out := mustCall(t, f.cs, mcpserver.ToolContext, map[string]any{"session": "trip", "max_tokens": "500"})
		if out["max_tokens"] != float64(500) || out["tokens"].(float64) > 500 {
			t.Errorf("max_tokens \"500\": budget %v, %v tokens", out["max_tokens"], out["tokens"])
		}
		if got := mustCall(t, f.cs, mcpserver.ToolSearch, map[string]any{"query": "hotel Lisbon", "k": "2"}); len(got["results"].([]any)) != 2 {
			t.Errorf("k \"2\": %d results", len(got["results"].([]any)))
		}
		mustFail(t, f.cs, mcpserver.ToolContext, map[string]any{"session": "trip", "max_tokens": "five hundred"}, memory.EINVALID)
		mustFail(t, f.cs, mcpserver.ToolContext, map[string]any{"session": "trip", "max_tokens": "0"}, memory.EINVALID)
	})
}

// resources/list names the caller's sessions, a page at a time, and no
// other tenant's.
func TestResourcesListSessions(t *testing.T) {
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := memory.NewContextWithTenant(context.Background(), "t1")
		other := memory.NewContextWithTenant(context.Background(), "t2")
		const extra = 130 // with trip: two pages of 100
		for i := range extra {
			if _, err := f.h.Append(ctx, fmt.Sprintf("s%03d", i), []*memory.Message{{Role: memory.RoleUser, Content: "hello"}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.h.Append(other, "secret-of-t2", []*memory.Message{{Role: memory.RoleUser, Content: "hello"}}); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		pages := 0
		for r, err := range f.cs.Resources(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			if r.MIMEType != "application/json" || seen[r.URI] {
				t.Errorf("resource %+v (seen before: %v)", r, seen[r.URI])
			}
			seen[r.URI] = true
		}
		first, err := f.cs.ListResources(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for p := first; ; pages++ {
			if p.NextCursor == "" {
				break
			}
			if p, err = f.cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: p.NextCursor}); err != nil {
				t.Fatal(err)
			}
		}
		if len(seen) != extra+1 || !seen[mcpserver.SessionURI("trip")] || !seen[mcpserver.SessionURI("s129")] || seen[mcpserver.SessionURI("secret-of-t2")] || pages != 1 {
			t.Errorf("listed %d sessions in %d pages after the first (trip %v, t2's %v)", len(seen), pages, seen[mcpserver.SessionURI("trip")], seen[mcpserver.SessionURI("secret-of-t2")])
		}
		if _, err := f.cs.ListResources(context.Background(), &mcp.ListResourcesParams{Cursor: "not-a-cursor!"}); err == nil {
			t.Error("a bad cursor was accepted")
		}
	})
}

// The SDK's own log lines (one message string each, about connections) go
// into ctxd's log at debug, marked as the SDK's; a warning stays one.
func TestSDKLogsAtDebug(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := mcpserver.SDKLogs(log)
	h.Info("session connected")
	h.Warn("something odd")
	out := buf.String()
	if !strings.Contains(out, `"level":"DEBUG","msg":"session connected","component":"mcp-sdk"`) ||
		!strings.Contains(out, `"level":"WARN","msg":"something odd"`) {
		t.Errorf("log:\n%s", out)
	}
	var quiet bytes.Buffer
	mcpserver.SDKLogs(slog.New(slog.NewTextHandler(&quiet, nil))).Info("session connected")
	if quiet.Len() != 0 {
		t.Errorf("at the default level the SDK's info line was logged: %s", quiet.String())
	}
}
