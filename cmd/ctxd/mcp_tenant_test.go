package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Through /mcp, the tenant of the caller's key scopes every tool: tenant b
// (with a session named like one of a's) finds, reads, recovers, builds and
// changes nothing of a's. One subtest per tool, each ending with a's data
// unchanged; each also shows a (or the admin key acting as a) reaching what
// b cannot, so no check passes for want of data.
func TestMCPTenantIsolationPerTool(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	a, b := ts.as(keyA), ts.as(keyB)
	cold := seedTrip(t, a)
	aIDs := append(a.store("aonly", msg("user", "alpha private plan with pineapple")), cold)
	b.store("trip", msg("user", "bravo likes turnips"))
	snapshotA := func() string { return a.snapshot("trip") + a.snapshot("aonly") }
	before := snapshotA()

	csA, csB := mcpOverHTTP(t, ts, keyA), mcpOverHTTP(t, ts, keyB)
	csAdminAsA := mcpOverHTTP(t, ts, keyAdmin, withHeader{"X-Ctxd-Tenant", "a"})
	tool := func(name string, fn func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			fn(t)
			if got := snapshotA(); got != before {
				t.Fatalf("tenant b's calls changed tenant a's data:\nbefore %s\nafter  %s", before, got)
			}
		})
	}
	tool(mcpserver.ToolSearch, func(t *testing.T) {
		for _, args := range []map[string]any{{"query": "marmalade launch code"}, {"query": "pineapple", "session": "aonly"},
			{"query": "marmalade", "session": "trip", "mode": "text"}, {"query": "alpha private plan", "mode": "vector"}} {
			if got := fmtJSON(toolOK(t, csB, mcpserver.ToolSearch, args)["results"]); strings.Contains(got, "marmalade") || strings.Contains(got, "alpha") {
				t.Errorf("b's search %v found a's messages: %s", args, got)
			}
		}
		if got := fmtJSON(toolOK(t, csA, mcpserver.ToolSearch, map[string]any{"query": "pineapple"})); !strings.Contains(got, "pineapple") {
			t.Errorf("a's own search misses its message: %s", got)
		}
	})
	tool(mcpserver.ToolGet, func(t *testing.T) {
		for _, id := range aIDs {
			toolFails(t, csB, mcpserver.ToolGet, map[string]any{"id": id}, "not_found")
			toolOK(t, csA, mcpserver.ToolGet, map[string]any{"id": id})
			toolOK(t, csAdminAsA, mcpserver.ToolGet, map[string]any{"id": id})
		}
	})
	tool(mcpserver.ToolRecover, func(t *testing.T) {
		// By id alone, and naming b's own session of the same name.
		toolFails(t, csB, mcpserver.ToolRecover, map[string]any{"id": cold}, "not_found")
		toolFails(t, csB, mcpserver.ToolRecover, map[string]any{"id": cold, "session": "trip"}, "not_found")
		toolFails(t, csB, mcpserver.ToolRecover, map[string]any{"id": aIDs[0], "session": "aonly"}, "not_found")
	})
	tool(mcpserver.ToolContext, func(t *testing.T) {
		out := toolOK(t, csB, mcpserver.ToolContext, map[string]any{"session": "trip", "prompt": "what is the marmalade launch code?"})
		if got := fmtJSON(out["messages"]); strings.Contains(got, "marmalade") || !strings.Contains(got, "turnips") {
			t.Errorf("b's window of its trip: %s", got)
		}
		toolFails(t, csB, mcpserver.ToolContext, map[string]any{"session": "aonly", "prompt": "pineapple"}, "not_found")
	})
	tool(mcpserver.ToolStatus, func(t *testing.T) {
		toolFails(t, csB, mcpserver.ToolStatus, map[string]any{"session": "aonly"}, "not_found")
		own := toolOK(t, csB, mcpserver.ToolStatus, map[string]any{"session": "trip"})
		if n := own["messages"].(map[string]any)["active"]; n != float64(1) {
			t.Errorf("b's trip shows %v active messages, want its own 1", n)
		}
		toolOK(t, csA, mcpserver.ToolStatus, map[string]any{"session": "aonly"})
	})
	tool(mcpserver.ToolSave, func(t *testing.T) {
		// b's note lands in b's trip, not in a's of the same name.
		toolOK(t, csB, mcpserver.ToolSave, map[string]any{"session": "trip", "content": "bravo's gate code is 5512"})
		toolOK(t, csB, mcpserver.ToolSave, map[string]any{"session": "aonly", "content": "bravo's own aonly"})
		if got := fmtJSON(toolOK(t, csA, mcpserver.ToolSearch, map[string]any{"query": "bravo gate code"})); strings.Contains(got, "5512") || strings.Contains(got, "bravo") {
			t.Errorf("a finds b's notes: %s", got)
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		// One server answers every request: calls of both tenants at once
		// each run as their own key's tenant.
		var wg sync.WaitGroup
		errs := make(chan string, 80)
		for i := range 8 {
			wg.Go(func() {
				for range 10 {
					cs, wantErr := csA, false
					if i%2 == 1 {
						cs, wantErr = csB, true
					}
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolGet, Arguments: map[string]any{"id": aIDs[0]}})
					if err != nil || res.IsError != wantErr {
						errs <- fmt.Sprintf("caller %d: error %v, isError %v, want %v", i, err, res != nil && res.IsError, wantErr)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})
	t.Run("resource", func(t *testing.T) {
		// A session b never wrote to (b saved an aonly of its own above).
		a.store("alpha-only", msg("user", "x"))
		if _, err := csB.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ctxd://sessions/alpha-only"}); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("b reads a's session resource: %v", err)
		}
		if _, err := csA.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ctxd://sessions/alpha-only"}); err != nil {
			t.Errorf("a reads its own session resource: %v", err)
		}
	})
}

// A tenant's resources are marked for its own client's cache only: the
// SDK's default scope, "public", let any intermediary keep one tenant's
// session status and serve it to another.
func TestMCPResultsPrivate(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	ts.as(keyA).store("mine", msg("user", "hello"))
	cs := mcpOverHTTP(t, ts, keyA)
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ctxd://sessions/mine"})
	if err != nil {
		t.Fatal(err)
	}
	if res.CacheScope != "private" {
		t.Fatalf("resources/read of a tenant's session: cacheScope %q, want private", res.CacheScope)
	}
}
