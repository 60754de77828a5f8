package main

import (
	"fmt"
	"testing"
)

// Policy overrides a PUT accepts must leave the session workable: whatever a
// client sets, later writes, compactions, context calls and listings of that
// session answer without a 5xx. Values the domain cannot work with are
// refused by the PUT (400) instead.
func TestHostilePolicyExtremes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes and compacts a session per row")
	}
	ts := startServer(t, t.TempDir())
	const big = 1 << 62
	rows := []map[string]any{
		{"recoverable_for_days": 1_000_000_000},
		{"recoverable_for_days": 3_000_000},
		{"weight_similarity": 1e308, "weight_recency": 1e308},
		{"weight_similarity": 1e308, "weight_recency": 1e308, "weight_references": 1e308, "weight_importance": 1e308},
		{"weight_similarity": 5e-324, "weight_recency": 0, "weight_references": 0, "weight_importance": 0},
		{"recency_half_life_turns": 5e-324},
		{"recency_half_life_turns": 1e308},
		{"reserve_tokens": big},
		{"reserve_tokens": 1_000_000},
		{"flush_threshold_tokens": big},
		{"summary_target_tokens": big},
		{"summary_target_tokens": 16},
		{"tool_trim_chars": big},
		{"tool_keep_head_chars": big / 2, "tool_keep_tail_chars": big / 2, "tool_trim_chars": big},
		{"tool_keep_head_chars": big, "tool_keep_tail_chars": big},
		{"tool_trim_after_turns": big, "tool_clear_after_turns": big},
		{"tool_trim_chars": 1, "tool_keep_head_chars": 0, "tool_keep_tail_chars": 0, "tool_trim_after_turns": 0, "tool_clear_after_turns": 0},
		{"keep_recent": big},
		{"min_chunks_to_keep": big},
		{"keep_recent": 0, "min_chunks_to_keep": 0},
		{"relevance_cutoff": 0.999999},
		{"compaction_trigger_pct": 5e-324, "target_pct": 5e-324},
		{"compaction_trigger_pct": 0.999999, "max_context_pct": 1},
		{"compaction_trigger_pct": 1e-9, "target_pct": 1e-10, "max_context_pct": 2e-9},
		{"pinned_max_pct": 5e-324},
		{"pinned_max_pct": 1},
	}
	for i, row := range rows {
		t.Run(fmt.Sprint(row), func(t *testing.T) {
			t.Parallel() // a session each, on the one server
			id := fmt.Sprintf("p%d", i)
			row["context_window"] = 1000
			put := hostileDo(t, ts, "PUT", "/v1/sessions/"+id, row, nil)
			if put.Status != 200 {
				if put.Status != 400 || put.errCode() != "invalid_request" {
					t.Fatalf("PUT = %d: %s", put.Status, put.Raw)
				}
				if r := hostileDo(t, ts, "GET", "/v1/sessions/"+id, nil, nil); r.Status != 404 {
					t.Fatalf("a refused PUT created the session: %d %s", r.Status, r.Raw)
				}
				return
			}
			tool := []any{msg("user", "run it"),
				map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "c", "type": "function",
					"function": map[string]any{"name": "run", "arguments": "{}"}}}},
				map[string]any{"role": "tool", "tool_call_id": "c", "content": fmt.Sprintf("%0500d", 7)}}
			steps := []struct {
				method, path string
				body         any
			}{
				{"POST", "/messages", map[string]any{"messages": []any{map[string]any{"role": "system", "content": "rules", "pinned": true}}}},
				{"POST", "/messages", map[string]any{"messages": tool}},
			}
			for j := range 30 {
				steps = append(steps, struct {
					method, path string
					body         any
				}{"POST", "/messages", map[string]any{"messages": []any{msg([]string{"user", "assistant"}[j%2], chatter(j))}}})
			}
			steps = append(steps, []struct {
				method, path string
				body         any
			}{
				{"POST", "/context", map[string]any{"prompt": "the train and the river"}},
				{"POST", "/context", map[string]any{"prompt": "run it", "max_tokens": 50}},
				{"POST", "/compact", map[string]any{"prompt": "the garden"}},
				{"POST", "/compact", map[string]any{"dry_run": true}},
				{"GET", "/cold?limit=1000", nil},
				{"GET", "/messages?state=all&limit=1000", nil},
				{"GET", "", nil},
			}...)
			for _, s := range steps {
				r := hostileDo(t, ts, s.method, "/v1/sessions/"+id+s.path, s.body, nil)
				if r.Status >= 500 {
					t.Fatalf("%s %s after PUT %v = %d: %s", s.method, s.path, row, r.Status, r.Raw)
				}
				// A compaction the write triggered must be able to run.
				if c, ok := r.Body["compaction"].(map[string]any); ok && c["error"] != nil {
					t.Fatalf("%s %s after PUT %v: compaction failed: %v", s.method, s.path, row, c["error"])
				}
			}
			r := hostileDo(t, ts, "POST", "/v1/search", map[string]any{"query": "train river", "session_id": id}, nil)
			if r.Status != 200 {
				t.Fatalf("search = %d: %s", r.Status, r.Raw)
			}
			if r := hostileDo(t, ts, "GET", "/v1/sessions?limit=1000", nil, nil); r.Status != 200 {
				t.Fatalf("list sessions = %d: %s", r.Status, r.Raw)
			}
		})
	}
}
