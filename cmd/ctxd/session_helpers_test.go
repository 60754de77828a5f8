// Helpers that read a session's messages and event logs, for the
// process-level tests (compaction's own rules are tested in internal/server).

package main

import (
	"fmt"
	"testing"
)

// chatter is filler in the shape of a real conversation turn.
func chatter(i int) string {
	topics := []string{"the weather was mild so we walked along the river", "lunch was a sandwich from the corner shop",
		"the train ran late again this morning", "we talked about a film neither of us liked much",
		"the garden needs watering after the dry week", "a neighbour is repainting their fence"}
	return fmt.Sprintf("turn %d: %s, and then %s.", i, topics[i%len(topics)], topics[(i*7+3)%len(topics)])
}

func allMessages(ts *testServer, session string) []map[string]any {
	ts.t.Helper()
	var out []map[string]any
	cursor := ""
	for {
		body := ts.mustDo(200, "GET", "/v1/sessions/"+session+"/messages?state=all&limit=1000&cursor="+cursor, nil)
		for _, m := range body["messages"].([]any) {
			out = append(out, m.(map[string]any))
		}
		if cursor = body["next_cursor"].(string); cursor == "" {
			return out
		}
	}
}

// checkReachable asserts invariant 1: every acknowledged id is retrievable,
// in the window or cold, and a summarized one is listed in a summary's sources.
func checkReachable(t *testing.T, ts *testServer, session string, acked []string) {
	t.Helper()
	msgs := allMessages(ts, session)
	byID := map[string]map[string]any{}
	sources := map[string]bool{}
	for _, m := range msgs {
		byID[m["id"].(string)] = m
		if m["kind"] == "summary" {
			for _, s := range m["sources"].([]any) {
				sources[s.(string)] = true
			}
		}
	}
	for _, id := range acked {
		m := byID[id]
		if m == nil {
			t.Fatalf("acknowledged message %s is gone", id)
		}
		if m["state"] == "summarized" && !sources[id] {
			t.Fatalf("summarized message %s is in no summary's sources", id)
		}
	}
}
