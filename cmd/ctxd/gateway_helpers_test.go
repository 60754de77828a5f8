package main

// The gateway's rules are tested in internal/server; this serves the
// process-level gateway tests here (agents, SDKs in node, replays).

// sessionMessages lists every message of a session, of every state.
func sessionMessages(ts *testServer, session string) []map[string]any {
	ts.t.Helper()
	body := ts.mustDo(200, "GET", "/v1/sessions/"+session+"/messages?state=all&limit=1000", nil)
	var out []map[string]any
	for _, m := range body["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}
