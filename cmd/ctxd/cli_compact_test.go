package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/numfmt"
)

// fillToCompact fills a 4,000-token session past its compaction target
// (1,400) but short of its trigger (2,000), so only a manual compaction runs.
func fillToCompact(t *testing.T, ts *testServer, session string) {
	t.Helper()
	ts.mustDo(200, "PUT", "/v1/sessions/"+session, map[string]any{"context_window": 4000, "relevance_cutoff": 0.06})
	ts.store(session, map[string]any{"role": "system", "content": "You are a helpful assistant.", "pinned": true})
	ts.store(session, msg("user", "My project is called Bluefin and its repo is at /srv/bluefin."))
	for i := 0; ; i++ {
		body := ts.mustDo(201, "POST", "/v1/sessions/"+session+"/messages",
			map[string]any{"messages": []any{msg([]string{"user", "assistant"}[i%2], chatter(i))}})
		st := body["session"].(map[string]any)
		if body["compaction"] != nil || st["compactions"].(float64) != 0 {
			t.Fatalf("a compaction ran on its own at message %d: %v", i, body["compaction"])
		}
		if st["tokens"].(float64) > 1700 {
			return
		}
	}
}

func coldChunks(ts *testServer, session string) []map[string]any {
	ts.t.Helper()
	var out []map[string]any
	for _, c := range ts.mustDo(200, "GET", "/v1/sessions/"+session+"/cold?limit=1000&order=oldest", nil)["chunks"].([]any) {
		out = append(out, c.(map[string]any))
	}
	return out
}

func TestCLICompactColdDropsRecoverLogs(t *testing.T) {
	t.Parallel()
	setPageSize(t, 2)
	ts := startServer(t, t.TempDir())
	fillToCompact(t, ts, "work")
	before := int(ts.sessionStatus("work")["tokens"].(float64))

	t.Run("refuses without --now", func(t *testing.T) {
		r := ts.cli(t, exitUsage, "compact", "work")
		if !strings.Contains(r.Err, "add --now") || !strings.Contains(r.Err, "automatically") {
			t.Fatalf("compact without --now: stderr %q", r.Err)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		out := ts.cli(t, 0, "compact", "work", "--now", "--dry-run").Out
		if !strings.Contains(out, "dry run") || !strings.Contains(out, "DECISION") {
			t.Fatalf("dry run output:\n%s", out)
		}
		rep := decodeJSON(t, ts.cli(t, 0, "compact", "work", "--now", "--dry-run", "--json").Out)
		if rep["dry_run"] != true || len(rep["dropped"].([]any)) == 0 || rep["tokens_before"] != float64(before) {
			t.Fatalf("dry run report = %v", rep)
		}
		if st := ts.sessionStatus("work"); st["compactions"] != 0.0 || len(coldChunks(ts, "work")) != 0 {
			t.Fatalf("a dry run changed the session: %v", st)
		}
	})

	var cold []map[string]any
	t.Run("now", func(t *testing.T) {
		out := ts.cli(t, 0, "compact", "work", "--now", "--prompt", "where is the Bluefin repo").Out
		st := ts.sessionStatus("work")
		cold = coldChunks(ts, "work")
		if st["compactions"] != 1.0 || len(cold) == 0 {
			t.Fatalf("after compact --now: %v, %d cold chunks", st, len(cold))
		}
		after := int(st["tokens"].(float64))
		for _, want := range []string{"compacted work (trigger manual)", numfmt.Thousands(before) + " -> " + numfmt.Thousands(after),
			fmt.Sprintf("dropped     %d", len(cold))} {
			if !strings.Contains(out, want) {
				t.Errorf("compact output lacks %q:\n%s", want, out)
			}
		}
	})
	if len(cold) < 3 {
		t.Fatalf("need at least 3 cold chunks, have %d", len(cold))
	}
	ids := make([]string, len(cold))
	for i, c := range cold {
		ids[i] = c["id"].(string)
	}

	t.Run("drops", func(t *testing.T) {
		out := ts.cli(t, 0, "drops", "--session", "work").Out
		for _, c := range cold {
			if !strings.Contains(out, c["id"].(string)+"  "+c["drop_reason"].(string)) {
				t.Errorf("drops lacks %s with reason %s:\n%s", c["id"], c["drop_reason"], out)
			}
		}
		evs := decodeJSON(t, ts.cli(t, 0, "drops", "--session", "work", "--json").Out)["events"].([]any)
		if len(evs) != len(cold) {
			t.Fatalf("drops --json has %d events, want %d", len(evs), len(cold))
		}
		for i, e := range evs {
			e := e.(map[string]any)
			if e["chunk"] != ids[i] || e["session"] != "work" || e["score"] != cold[i]["relevance_score"] {
				t.Fatalf("drop event %d = %v, want chunk %s score %v", i, e, ids[i], cold[i]["relevance_score"])
			}
		}
		if rows := lines(ts.cli(t, 0, "drops", "--session", "work", "-n", "2").Out); len(rows) != 3 || !strings.HasPrefix(rows[2], ids[len(ids)-1]) {
			t.Fatalf("drops -n 2 = %q, want a header and the last 2", rows)
		}
		if out := ts.cli(t, 0, "drops", "--session", "elsewhere").Out; !strings.Contains(out, "no drops") {
			t.Fatalf("drops of another session = %q", out)
		}
	})
	t.Run("cold list", func(t *testing.T) {
		out := ts.cli(t, 0, "cold", "list", "--session", "work").Out
		if rows := lines(out); len(rows) != len(cold)+1 || !strings.Contains(rows[0], "RECOVERABLE UNTIL") {
			t.Fatalf("cold list has %d lines, want a header and %d chunks (pages of 2):\n%s", len(rows), len(cold), out)
		}
		for _, id := range ids {
			if !strings.Contains(out, id) {
				t.Errorf("cold list lacks %s", id)
			}
		}
		// newest first, across pages of 2; --oldest the other way
		n := len(ids)
		got := decodeJSON(t, ts.cli(t, 0, "cold", "list", "--session", "work", "--limit", "3", "--json").Out)["chunks"].([]any)
		if len(got) != 3 || got[0].(map[string]any)["id"] != ids[n-1] || got[2].(map[string]any)["id"] != ids[n-3] || got[0].(map[string]any)["drop_reason"] != cold[n-1]["drop_reason"] {
			t.Fatalf("cold list --limit 3 --json = %v, want the last 3 of %v, newest first", got, ids)
		}
		got = decodeJSON(t, ts.cli(t, 0, "cold", "list", "--session", "work", "--limit", "3", "--oldest", "--json").Out)["chunks"].([]any)
		if len(got) != 3 || got[2].(map[string]any)["id"] != ids[2] || got[0].(map[string]any)["drop_reason"] != cold[0]["drop_reason"] {
			t.Fatalf("cold list --limit 3 --oldest --json = %v, want the first 3 of %v", got, ids)
		}
	})
	t.Run("recover", func(t *testing.T) {
		out := ts.cli(t, 0, "recover", "--chunk", ids[0]).Out
		if !strings.Contains(out, "recovered "+ids[0]+" into session work") {
			t.Fatalf("recover without --session: %q", out)
		}
		if m := ts.mustDo(200, "GET", "/v1/messages/"+ids[0], nil); m["state"] != "recovered" {
			t.Fatalf("after recover, %s is %v", ids[0], m["state"])
		}
		m := decodeJSON(t, ts.cli(t, 0, "recover", "--chunk", ids[0], "--session", "work", "--json").Out)
		if m["id"] != ids[0] || m["state"] != "recovered" || m["session_id"] != "work" {
			t.Fatalf("second recover --json = %v", m)
		}
		if r := ts.cli(t, exitNotFound, "recover", "--chunk", "01NOSUCHCHUNK"); !strings.Contains(r.Err, "01NOSUCHCHUNK") {
			t.Fatalf("recover of a missing chunk: stderr %q", r.Err)
		}
	})
	t.Run("logs", func(t *testing.T) {
		rows := lines(ts.cli(t, 0, "logs", "compaction", "--session", "work").Out)
		if len(rows) != 1 || !strings.Contains(rows[0], "work") || !strings.Contains(rows[0], "trigger=manual") ||
			!strings.Contains(rows[0], fmt.Sprintf("tokens_before=%d", before)) || !strings.Contains(rows[0], fmt.Sprintf("dropped=%d", len(cold))) {
			t.Fatalf("logs compaction = %q", rows)
		}
		evs := jsonLines(t, ts.cli(t, 0, "logs", "compaction", "--json").Out)
		if len(evs) != 1 || evs[0]["trigger"] != "manual" || evs[0]["tokens_before"] != float64(before) || evs[0]["session"] != "work" {
			t.Fatalf("logs compaction --json = %v", evs)
		}
		if out := ts.cli(t, 0, "logs", "recoveries").Out; !strings.Contains(out, "chunk="+ids[0]) {
			t.Fatalf("logs recoveries lacks the recovery of %s:\n%s", ids[0], out)
		}
		if evs := jsonLines(t, ts.cli(t, 0, "logs", "health", "-n", "2", "--json").Out); len(evs) != 2 || evs[1]["session"] != "work" {
			t.Fatalf("logs health -n 2 --json = %v", evs)
		}
		if r := ts.cli(t, exitUsage, "logs", "secrets"); !strings.Contains(r.Err, "stream") {
			t.Fatalf("logs of an unknown stream: stderr %q", r.Err)
		}
	})
}

func TestCLISearchAndContext(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.store("ops", map[string]any{"role": "system", "content": "You are a deployment assistant.", "pinned": true})
	pw := ts.store("ops", msg("user", "The staging DB password rotates every Friday."))[0]
	for i := range 6 {
		ts.store("ops", msg([]string{"user", "assistant"}[i%2], chatter(i)))
	}
	ts.store("other", msg("user", "Our office plants need watering on Mondays."))

	t.Run("search", func(t *testing.T) {
		rows := lines(ts.cli(t, 0, "search", "password rotate").Out)
		if len(rows) < 2 || !strings.Contains(rows[1], "ops") || !strings.Contains(rows[1], pw) ||
			!strings.Contains(rows[1], "The staging DB «password» «rotates» every Friday.") {
			t.Fatalf("search = %q, want the password message first", rows)
		}
		res := decodeJSON(t, ts.cli(t, 0, "search", "password rotate", "-k", "1", "--mode", "text", "--json").Out)["results"].([]any)
		if len(res) != 1 || res[0].(map[string]any)["id"] != pw {
			t.Fatalf("search -k 1 --json = %v", res)
		}
		if out := ts.cli(t, 0, "search", "password rotate", "--session", "other").Out; strings.Contains(out, pw) {
			t.Fatalf("search --session other found ops' message:\n%s", out)
		}
	})
	t.Run("context", func(t *testing.T) {
		out := ts.cli(t, 0, "context", "ops", "when does the password rotate?", "--max-tokens", "500").Out
		if !strings.Contains(out, "pinned") || !strings.Contains(out, "You are a deployment assistant.") ||
			!strings.Contains(out, "of 500 tokens used") || strings.Contains(out, "SIM") {
			t.Fatalf("context output:\n%s", out)
		}
		win := decodeJSON(t, ts.cli(t, 0, "context", "ops", "when does the password rotate?", "--max-tokens", "500", "--json").Out)
		var got []string
		for _, m := range win["messages"].([]any) {
			got = append(got, m.(map[string]any)["id"].(string))
		}
		if win["budget"].(map[string]any)["max_tokens"] != 500.0 || !slices.Contains(got, pw) {
			t.Fatalf("context --json = %v", win)
		}
		if out := ts.cli(t, 0, "context", "ops", "password?", "--explain").Out; !strings.Contains(out, "SIM") || !strings.Contains(out, "LEVEL") {
			t.Fatalf("context --explain lacks the score components or levels:\n%s", out)
		}
		ts.cli(t, exitNotFound, "context", "nope", "anything")
	})
}
