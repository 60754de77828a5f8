package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/mcpserver"
	"github.com/ctxd/ctxd/mcpserver/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withHeader is a header an MCP client configured with it sends on every
// request (the key, a tenant).
type withHeader struct {
	name, value string
}

// mcpOverHTTP connects the SDK's own client to ts's /mcp over the
// streamable HTTP transport, sending key (none when "").
func mcpOverHTTP(t *testing.T, ts *testServer, key string, headers ...withHeader) *mcp.ClientSession {
	t.Helper()
	var rt http.RoundTripper = http.DefaultTransport
	if key != "" {
		headers = append(headers, withHeader{"Authorization", "Bearer " + key})
	}
	for _, h := range headers {
		rt = chained{h, rt}
	}
	tr := &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "ctxd-test", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect to %s/mcp: %v", ts.URL, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// chained sets one header, then sends with next.
type chained struct {
	h    withHeader
	next http.RoundTripper
}

func (c chained) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(c.h.name, c.h.value)
	return c.next.RoundTrip(r)
}

// mcpStdio runs the real `ctxd mcp` binary against ts as the SDK's
// CommandTransport does for a client configured with it.
func mcpStdio(t *testing.T, server string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(ctxdBinary(t), append([]string{"mcp", "--server", server}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "ctxd-test", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start ctxd mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("ctxd mcp did not end cleanly: %v\n%s", err, stderr.String())
		}
	})
	return cs
}

// callTool, toolOK and toolFails are mcptest's, named for these tests.
var (
	callTool  = mcptest.Call
	toolOK    = mcptest.OK
	toolFails = mcptest.Fails
)

// exerciseTools calls every tool once with good input and once with bad,
// over cs, against a server whose session "trip" of cs's tenant holds
// the cold message cold among others.
func exerciseTools(t *testing.T, cs *mcp.ClientSession, cold string) {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 6 {
		t.Errorf("%d tools, want 6", len(tools.Tools))
	}
	t.Run("memory_search", func(t *testing.T) {
		out := toolOK(t, cs, mcpserver.ToolSearch, map[string]any{"query": "marmalade launch code", "session": "trip", "k": 5})
		if res := out["results"].([]any); len(res) == 0 || !strings.Contains(res[0].(map[string]any)["content"].(string), "marmalade") {
			t.Errorf("search: %v", out)
		}
		toolFails(t, cs, mcpserver.ToolSearch, map[string]any{"query": "x", "mode": "fuzzy"}, "invalid_request")
	})
	t.Run("memory_save", func(t *testing.T) {
		out := toolOK(t, cs, mcpserver.ToolSave, map[string]any{"session": "trip", "content": "The launch is on Friday."})
		if out["id"] == "" || out["session"].(map[string]any)["id"] != "trip" {
			t.Errorf("save: %v", out)
		}
		toolFails(t, cs, mcpserver.ToolSave, map[string]any{"session": "trip", "content": ""}, "invalid_request")
	})
	t.Run("memory_context", func(t *testing.T) {
		out := toolOK(t, cs, mcpserver.ToolContext, map[string]any{"session": "trip", "prompt": "when is the launch?", "max_tokens": 800})
		if !strings.Contains(fmtJSON(out["messages"]), "Friday") || out["tokens"].(float64) > 800 {
			t.Errorf("context lacks the pinned note or passes its budget: %v", out)
		}
		toolFails(t, cs, mcpserver.ToolContext, map[string]any{"session": "no-such-session"}, "not_found")
	})
	t.Run("memory_get", func(t *testing.T) {
		if out := toolOK(t, cs, mcpserver.ToolGet, map[string]any{"id": cold}); out["id"] != cold {
			t.Errorf("get: %v", out)
		}
		toolFails(t, cs, mcpserver.ToolGet, map[string]any{"id": "01NOSUCHMESSAGE"}, "not_found")
	})
	t.Run("memory_recover", func(t *testing.T) {
		if out := toolOK(t, cs, mcpserver.ToolRecover, map[string]any{"id": cold}); out["state"] != "recovered" {
			t.Errorf("recover: %v", out)
		}
		toolFails(t, cs, mcpserver.ToolRecover, map[string]any{"id": cold, "session": "../x"}, "invalid_request")
	})
	t.Run("session_status", func(t *testing.T) {
		if out := toolOK(t, cs, mcpserver.ToolStatus, map[string]any{"session": "trip"}); out["id"] != "trip" || out["tokens"].(float64) <= 0 {
			t.Errorf("status: %v", out)
		}
		toolFails(t, cs, mcpserver.ToolStatus, map[string]any{"session": "no-such-session"}, "not_found")
	})
	t.Run("resource", func(t *testing.T) {
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ctxd://sessions/trip"})
		if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"id":"trip"`) {
			t.Errorf("read ctxd://sessions/trip: %v %v", res, err)
		}
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ctxd://sessions/no-such-session"}); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("read a missing session: %v, want resource not found", err)
		}
	})
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// seedTrip stores, as ts's caller, a session "trip" compacted past its
// small window, and returns one of its cold messages.
func seedTrip(t *testing.T, ts *testServer) string {
	t.Helper()
	ts.mustDo(200, "PUT", "/v1/sessions/trip", map[string]any{"context_window": 1500})
	ts.store("trip", msg("user", "the marmalade launch code is 7731"))
	for i := range 40 {
		ts.store("trip", msg("user", chatter(i)))
	}
	chunks := ts.mustDo(200, "GET", "/v1/sessions/trip/cold?limit=1", nil)["chunks"].([]any)
	if len(chunks) == 0 {
		t.Fatal("no cold chunk in trip")
	}
	return chunks[0].(map[string]any)["id"].(string)
}

func TestMCPOverHTTP(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	cold := seedTrip(t, ts.as(keyA))
	exerciseTools(t, mcpOverHTTP(t, ts, keyA), cold)
}

func TestMCPOverHTTPWithoutKeys(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	cold := seedTrip(t, ts)
	exerciseTools(t, mcpOverHTTP(t, ts, ""), cold)
}

func TestMCPHTTPEdges(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	init := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "x", "version": "1"}}}
	t.Run("ErrNoKey", func(t *testing.T) {
		r := ts.do("POST", "/mcp", init)
		if r.Status != 401 || r.errCode() != "unauthorized" {
			t.Errorf("POST /mcp without a key: %d %s", r.Status, r.Raw)
		}
	})
	t.Run("ErrWrongKey", func(t *testing.T) {
		r := ts.as("not-a-key-0123456789").do("POST", "/mcp", init)
		if r.Status != 401 || r.errCode() != "unauthorized" {
			t.Errorf("POST /mcp with a wrong key: %d %s", r.Status, r.Raw)
		}
	})
	t.Run("ErrGetIsNotAllowed", func(t *testing.T) {
		// Stateless: no stream for the server to push on.
		if r := ts.as(keyA).do("GET", "/mcp", nil); r.Status != 405 {
			t.Errorf("GET /mcp: %d %s", r.Status, r.Raw)
		}
	})
	t.Run("ErrOtherTenantWithoutAdmin", func(t *testing.T) {
		r := ts.as(keyA, "b").do("POST", "/mcp", init)
		if r.Status != 403 || r.errCode() != "forbidden" {
			t.Errorf("POST /mcp as another tenant: %d %s", r.Status, r.Raw)
		}
	})
	// The SDK's own refusals come in the API's error shape too.
	t.Run("ErrAcceptWithoutEventStream", func(t *testing.T) {
		r := ts.as(keyA).do("POST", "/mcp", init)
		if r.Status != 400 || r.errCode() != "invalid_request" || !strings.Contains(string(r.Raw), "Accept") {
			t.Errorf("POST /mcp accepting only JSON: %d %s", r.Status, r.Raw)
		}
	})
	t.Run("ErrNotJSONRPC", func(t *testing.T) {
		c := ts.as(keyA)
		c.Header.Set("Accept", "application/json, text/event-stream")
		for _, body := range []string{"not json", "[]", `{"jsonrpc": "2.0", "id": 1, "method": "no/such/method"}`} {
			if r := c.do("POST", "/mcp", body); r.Status != 400 || r.errCode() != "invalid_request" {
				t.Errorf("POST /mcp %q: %d %s", body, r.Status, r.Raw)
			}
		}
	})
	t.Run("ErrTooLarge", func(t *testing.T) {
		big := map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
			"params": map[string]any{"name": "memory_search", "arguments": map[string]any{"query": strings.Repeat("x", 9<<20)}}}
		if r := ts.as(keyA).do("POST", "/mcp", big); r.Status != 413 {
			t.Errorf("POST /mcp of 9 MiB: %d %.200s", r.Status, r.Raw)
		}
	})
}

func TestMCPStdio(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	cold := seedTrip(t, ts.as(keyA))
	exerciseTools(t, mcpStdio(t, ts.URL, "--api-key", keyA), cold)
}

func TestMCPStdioKeyFromEnvironment(t *testing.T) {
	ts := startWithKeys(t)
	t.Setenv("CTXD_API_KEY", keyB)
	t.Setenv("CTXD_SERVER", ts.URL)
	ts.as(keyB).store("mine", msg("user", "bravo keeps turnips"))
	cs := mcpStdio(t, "http://127.0.0.1:1") // the flag, given, wins over CTXD_SERVER
	toolFails(t, cs, mcpserver.ToolStatus, map[string]any{"session": "mine"}, "unavailable")

	cmd := exec.Command(ctxdBinary(t), "mcp")
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "ctxd-test", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	if out := toolOK(t, cs2, mcpserver.ToolStatus, map[string]any{"session": "mine"}); out["id"] != "mine" {
		t.Errorf("status as the environment's key: %v", out)
	}
}

func TestMCPStdioServerDown(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1: every call is unavailable, none a crash.
	cs := mcpStdio(t, "http://127.0.0.1:1", "--timeout", "5s")
	for tool, args := range map[string]map[string]any{
		mcpserver.ToolSearch: {"query": "x"}, mcpserver.ToolGet: {"id": "x"}, mcpserver.ToolStatus: {"session": "s"},
		mcpserver.ToolSave: {"session": "s", "content": "x"}, mcpserver.ToolContext: {"session": "s"},
		mcpserver.ToolRecover: {"id": "x", "session": "s"},
	} {
		a := callTool(t, cs, tool, args)
		if a.Code() != "unavailable" || !strings.Contains(a.Err, "ctxd serve") {
			t.Errorf("%s with the server down: %q", tool, a.Err)
		}
	}
}

func TestMCPStdioBadFlags(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(ctxdBinary(t), "mcp", "--server", "ftp://x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--server") {
		t.Errorf("ctxd mcp --server ftp://x: %v %s", err, out)
	}
}

// Each call of a JSON-RPC batch is charged to the key's rate limit: one
// POST of 2,000 memory_context calls ran them all under a limit of 2/s. A
// batch the allowance cannot cover is refused whole, 429, before any call
// runs.
func TestMCPBatchRateLimited(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t, func(c *Config) { c.RateLimit, c.RateBurst = 0.01, 3 })
	batch := func(n int) string {
		calls := make([]string, n)
		for i := range calls {
			calls[i] = fmt.Sprintf(`{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "memory_save", "arguments": {"session": "s", "content": "note %d"}}}`, i+1, i)
		}
		return "[" + strings.Join(calls, ",") + "]"
	}
	mcpAs := func(key string) *testServer {
		c := ts.as(key)
		c.Header.Set("Accept", "application/json, text/event-stream")
		c.Header.Set("Mcp-Protocol-Version", "2025-03-26") // batches end with 2025-06-18
		return c
	}
	if r := mcpAs(keyA).do("POST", "/mcp", batch(5)); r.Status != 429 || r.errCode() != "rate_limited" {
		t.Fatalf("a batch of 5 calls under a burst of 3: %d %.300s, want 429", r.Status, r.Raw)
	}
	if r := ts.as(keyAdmin, "a").do("GET", "/v1/sessions/s", nil); r.Status != 404 {
		t.Fatalf("the refused batch stored notes: %d %s", r.Status, r.Raw)
	}
	b := mcpAs(keyB)
	if r := b.do("POST", "/mcp", batch(3)); r.Status != 200 || strings.Contains(string(r.Raw), `"isError":true`) {
		t.Fatalf("a batch of 3 calls within a burst of 3: %d %.300s", r.Status, r.Raw)
	}
	if r := b.do("GET", "/v1/sessions", nil); r.Status != 429 {
		t.Fatalf("a request after a batch of 3 spent the burst of 3: %d %s, want 429", r.Status, r.Raw)
	}
}
