package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var pinnedConflict = regexp.MustCompile(`use (\d+) tokens and this write would add (\d+), past the limit of (\d+)`)

// pinnedRefusal asserts r is the pinned budget's 409 and returns the
// tokens it says pinned messages use, the write adds, and the limit.
func pinnedRefusal(t *testing.T, r resp) (used, adds, limit int) {
	t.Helper()
	e, _ := r.Body["error"].(map[string]any)
	text := fmt.Sprint(e["message"])
	m := pinnedConflict.FindStringSubmatch(text)
	if r.Status != 409 || r.errCode() != "conflict" || m == nil ||
		!strings.Contains(text, "PATCH /v1/messages/{id}") || !strings.Contains(text, "DELETE /v1/messages/{id}") {
		t.Fatalf("want the pinned budget's 409, got %d %s", r.Status, r.Raw)
	}
	used, _ = strconv.Atoi(m[1])
	adds, _ = strconv.Atoi(m[2])
	limit, _ = strconv.Atoi(m[3])
	return used, adds, limit
}

// Pinned and system messages have a budget of their own: a write past it is
// refused with what they use, the limit and how to free room, and stores
// nothing; unpinning or deleting frees room; the total is exact and kept
// across a restart.
func TestPinnedBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	st := ts.mustDo(200, "PUT", "/v1/sessions/p", map[string]any{"context_window": 2000})
	if pol := st["policy"].(map[string]any); pol["pinned_max_pct"] != 0.25 {
		t.Fatalf("default pinned_max_pct = %v", pol["pinned_max_pct"])
	}
	ts.store("p", map[string]any{"role": "system", "content": "You are a careful release assistant.", "pinned": true})
	note := func(i int) map[string]any {
		return map[string]any{"role": "assistant", "pinned": true,
			"content": fmt.Sprintf("NOTE %d: the release branch is release-%d, cut from main after the freeze; deploy with make ship.", i, i)}
	}
	var notes []string
	var refused resp
	for i := 0; i < 40; i++ {
		r := ts.do("POST", "/v1/sessions/p/messages", map[string]any{"messages": []any{note(i), msg("user", chatter(i))}})
		if r.Status == 409 {
			refused = r
			break
		}
		if r.Status != 201 {
			t.Fatalf("note %d: %d %s", i, r.Status, r.Raw)
		}
		notes = append(notes, r.Body["ids"].([]any)[0].(string))
	}
	if refused.Status == 0 {
		t.Fatal("40 pinned notes in a 2,000-token window were all taken")
	}
	used, adds, limit := pinnedRefusal(t, refused)
	_, pinned := checkTotals(t, ts, "p")
	if limit != 500 || used != pinned || used+adds <= limit || used > limit {
		t.Fatalf("refusal says %d used + %d > %d; the messages' pinned tokens are %d", used, adds, limit, pinned)
	}
	// Nothing of the refused write was stored, not even its user message.
	snap := ts.snapshot("p")
	pinnedRefusal(t, ts.do("POST", "/v1/sessions/p/messages", map[string]any{"messages": []any{msg("user", "unpinned part"), note(99)}}))
	if got := ts.snapshot("p"); got != snap {
		t.Fatalf("a refused write changed the session:\nbefore %s\nafter  %s", snap, got)
	}

	// Edits are held to it too: pinning a long message, or making a pinned
	// note longer; shortening one is always allowed.
	long := ts.store("p", msg("user", strings.Repeat("a long unpinned message about the freeze. ", 20)))[0]
	pinnedRefusal(t, ts.do("PATCH", "/v1/messages/"+long, map[string]any{"pinned": true}))
	pinnedRefusal(t, ts.do("PATCH", "/v1/messages/"+notes[0], map[string]any{"content": strings.Repeat("a much longer note. ", 30)}))
	ts.mustDo(200, "PATCH", "/v1/messages/"+notes[1], map[string]any{"content": "NOTE: ship with make ship."})

	// Unpinning and deleting free room for the note that was refused.
	ts.mustDo(200, "PATCH", "/v1/messages/"+notes[2], map[string]any{"pinned": false})
	ts.mustDo(204, "DELETE", "/v1/messages/"+notes[3], nil)
	ts.mustDo(201, "POST", "/v1/sessions/p/messages", map[string]any{"messages": []any{note(99)}})
	checkTotals(t, ts, "p")

	// The total survives a restart: the next refusal counts the same.
	ts.Stop()
	ts = startServer(t, dir)
	var again resp
	for i := 100; i < 140 && again.Status != 409; i++ {
		again = ts.do("POST", "/v1/sessions/p/messages", map[string]any{"messages": []any{note(i)}})
	}
	used, _, _ = pinnedRefusal(t, again)
	if _, pinned = checkTotals(t, ts, "p"); used != pinned {
		t.Fatalf("after a restart the refusal says %d pinned tokens, the messages %d", used, pinned)
	}

	// A session may raise its budget; the policy field is checked.
	ts.mustDo(200, "PUT", "/v1/sessions/p", map[string]any{"pinned_max_pct": 0.6})
	ts.mustDo(201, "POST", "/v1/sessions/p/messages", map[string]any{"messages": []any{note(200)}})
	for _, bad := range []any{0, -0.1, 1.5, "0.3"} {
		if r := ts.do("PUT", "/v1/sessions/p", map[string]any{"pinned_max_pct": bad}); r.Status != 400 || !strings.Contains(string(r.Raw), "pinned_max_pct") {
			t.Fatalf("pinned_max_pct %v = %d %s", bad, r.Status, r.Raw)
		}
	}
}

// The pinned budget applies to a new session's first write too (refused,
// the session is not created), and a window made smaller leaves pinned
// messages over it: writes that add none, or shorten them, still pass.
func TestPinnedBudgetFirstWriteAndShrunkWindow(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	huge := strings.Repeat("Follow every rule of the style guide. ", 4500) // ~36k tokens: past a quarter of 128k
	_, _, limit := pinnedRefusal(t, ts.do("POST", "/v1/sessions/brandnew/messages", map[string]any{"messages": []any{
		msg("user", "hello"), map[string]any{"role": "system", "content": huge}}}))
	if limit != 32000 {
		t.Fatalf("limit of a new session = %d, want a quarter of 128000", limit)
	}
	ts.mustDo(404, "GET", "/v1/sessions/brandnew", nil)

	ts.store("fresh", map[string]any{"role": "system", "content": strings.Repeat("Follow every rule of the style guide. ", 12)})
	ts.mustDo(200, "PUT", "/v1/sessions/fresh", map[string]any{"context_window": 256})
	ts.store("fresh", msg("user", "an unpinned question"))
	sys := allMessages(ts, "fresh")[0]["id"].(string)
	pinnedRefusal(t, ts.do("PATCH", "/v1/messages/"+sys, map[string]any{"content": strings.Repeat("Follow every rule of the style guide. ", 13)}))
	ts.mustDo(200, "PATCH", "/v1/messages/"+sys, map[string]any{"content": "Follow the style guide."})
	checkTotals(t, ts, "fresh")
}
