package memory_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

var pinnedConflict = regexp.MustCompile(`use (\d+) tokens and this write would add (\d+), past the limit of (\d+)`)

// pinnedRefusal asserts err is the pinned budget's conflict and returns the
// tokens it says pinned messages use, the write adds, and the limit.
func pinnedRefusal(t *testing.T, err error) (used, adds, limit int) {
	t.Helper()
	text := fmt.Sprint(err)
	m := pinnedConflict.FindStringSubmatch(text)
	if memory.ErrorCode(err) != memory.ECONFLICT || m == nil ||
		!strings.Contains(text, "PATCH /v1/messages/{id}") || !strings.Contains(text, "DELETE /v1/messages/{id}") {
		t.Fatalf("want the pinned budget's conflict, got %v", err)
	}
	used, _ = strconv.Atoi(m[1])
	adds, _ = strconv.Atoi(m[2])
	limit, _ = strconv.Atoi(m[3])
	return used, adds, limit
}

// allMessages is every message of a session, every state, in order.
func allMessages(t *testing.T, svc *memory.Service, session string) []*memory.Message {
	t.Helper()
	var out []*memory.Message
	cursor := ""
	for {
		page, next, err := svc.ListMessages(context.Background(), session, []string{"all"}, cursor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if cursor = next; cursor == "" {
			return out
		}
	}
}

// pinnedTokens checks that each message's tokens are its exact cost and
// returns what the pinned and system messages in the window cost, counted
// from the messages (the harness checks the session's totals and counts
// against them when the test ends).
func pinnedTokens(t *testing.T, h *memorytest.Harness, session string) int {
	t.Helper()
	pinned := 0
	for _, m := range allMessages(t, h.Service, session) {
		exact, err := memory.MessageTokens(h.Tokenizer, memory.EncodingO200k,
			&memory.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls})
		if err != nil || m.Tokens != exact {
			t.Fatalf("message %s says %d tokens, its content counts %d (%v)", m.ID, m.Tokens, exact, err)
		}
		if m.InWindow() && (m.Pinned || (m.Role == memory.RoleSystem && !m.IsSummary())) {
			pinned += m.Tokens
		}
	}
	if err := h.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pinned
}

// sessionSnapshot is everything a client can read of a session, to prove a
// refused write changed nothing.
func sessionSnapshot(t *testing.T, svc *memory.Service, session string) string {
	t.Helper()
	st, err := svc.GetSession(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	st.UpdatedAt = st.CreatedAt
	var b strings.Builder
	fmt.Fprintf(&b, "%+v", *st)
	for _, m := range allMessages(t, svc, session) {
		fmt.Fprintf(&b, "\n%+v", *m)
	}
	return b.String()
}

func pinnedNote(i int) *memory.Message {
	return &memory.Message{Role: memory.RoleAssistant, Pinned: true,
		Content: fmt.Sprintf("NOTE %d: the release branch is release-%d, cut from main after the freeze; deploy with make ship.", i, i)}
}

// chatter is filler in the shape of a real conversation turn.
var chatter = memorytest.Chatter

// Pinned and system messages have a budget of their own: a write past it is
// refused with what they use, the limit and how to free room, and stores
// nothing; unpinning or deleting frees room; the total is exact, kept in
// the store (a second service on it counts the same), and a session may
// raise its budget.
func TestPinnedBudget(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	window := 2000
	st, err := h.PutSession(ctx, "p", memory.SessionUpdate{ContextWindow: &window})
	if err != nil || st.Policy.PinnedMaxPct != 0.25 {
		t.Fatalf("default pinned_max_pct = %v (%v)", st.Policy.PinnedMaxPct, err)
	}
	mustAppend(t, h, "p", &memory.Message{Role: memory.RoleSystem, Content: "You are a careful release assistant.", Pinned: true})
	var notes []string
	var refused error
	for i := 0; i < 40; i++ {
		h.Clock.Add(time.Second)
		res, err := h.Append(ctx, "p", []*memory.Message{pinnedNote(i), {Role: memory.RoleUser, Content: chatter(i)}})
		if memory.ErrorCode(err) == memory.ECONFLICT {
			refused = err
			break
		}
		if err != nil {
			t.Fatalf("note %d: %v", i, err)
		}
		notes = append(notes, res.IDs[0])
	}
	if refused == nil {
		t.Fatal("40 pinned notes in a 2,000-token window were all taken")
	}
	used, adds, limit := pinnedRefusal(t, refused)
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	pinned := pinnedTokens(t, h, "p")
	if limit != 500 || used != pinned || used+adds <= limit || used > limit {
		t.Fatalf("refusal says %d used + %d > %d; the messages' pinned tokens are %d", used, adds, limit, pinned)
	}
	// Nothing of the refused write was stored, not even its user message.
	snap := sessionSnapshot(t, h.Service, "p")
	_, err = h.Append(ctx, "p", []*memory.Message{{Role: memory.RoleUser, Content: "unpinned part"}, pinnedNote(99)})
	pinnedRefusal(t, err)
	if got := sessionSnapshot(t, h.Service, "p"); got != snap {
		t.Fatalf("a refused write changed the session:\nbefore %s\nafter  %s", snap, got)
	}

	// Edits are held to it too: pinning a long message, or making a pinned
	// note longer; shortening one is always allowed.
	long := mustAppend(t, h, "p", &memory.Message{Role: memory.RoleUser, Content: strings.Repeat("a long unpinned message about the freeze. ", 20)}).IDs[0]
	_, err = h.EditMessage(ctx, long, memory.MessageEdit{Pinned: new(true)})
	pinnedRefusal(t, err)
	_, err = h.EditMessage(ctx, notes[0], memory.MessageEdit{Content: new(strings.Repeat("a much longer note. ", 30))})
	pinnedRefusal(t, err)
	if _, err := h.EditMessage(ctx, notes[1], memory.MessageEdit{Content: new("NOTE: ship with make ship.")}); err != nil {
		t.Fatal(err)
	}

	// Unpinning and deleting free room for the note that was refused.
	if _, err := h.EditMessage(ctx, notes[2], memory.MessageEdit{Pinned: new(false)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.DeleteMessage(ctx, notes[3], false); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, "p", pinnedNote(99))
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	pinnedTokens(t, h, "p")

	// The total is kept in the store: a service that opens on it (as after
	// a restart, or another node) refuses at the same count.
	other, _ := h.Node(t)
	var again error
	for i := 100; i < 140 && again == nil; i++ {
		_, again = other.Append(ctx, "p", []*memory.Message{pinnedNote(i)})
	}
	used, _, _ = pinnedRefusal(t, again)
	if err := other.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if pinned = pinnedTokens(t, h, "p"); used != pinned {
		t.Fatalf("on a second service the refusal says %d pinned tokens, the messages %d", used, pinned)
	}

	// A session may raise its budget; the policy field is checked.
	if _, err := h.PutSession(ctx, "p", memory.SessionUpdate{Policy: &memory.PolicyOverrides{PinnedMaxPct: new(0.6)}}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, "p", pinnedNote(200))
	for _, bad := range []float64{0, -0.1, 1.5} {
		_, err := h.PutSession(ctx, "p", memory.SessionUpdate{Policy: &memory.PolicyOverrides{PinnedMaxPct: &bad}})
		if memory.ErrorCode(err) != memory.EINVALID || !strings.Contains(err.Error(), "pinned_max_pct") {
			t.Fatalf("pinned_max_pct %v: %v", bad, err)
		}
	}
}

// The pinned budget applies to a new session's first write too (refused,
// the session is not created), and a window made smaller leaves pinned
// messages over it: writes that add none, or shorten them, still pass.
func TestPinnedBudgetFirstWriteAndShrunkWindow(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	huge := strings.Repeat("Follow every rule of the style guide. ", 4500) // ~36k tokens: past a quarter of 128k
	_, err := h.Append(ctx, "brandnew", []*memory.Message{{Role: memory.RoleUser, Content: "hello"}, {Role: memory.RoleSystem, Content: huge}})
	if _, _, limit := pinnedRefusal(t, err); limit != 32000 {
		t.Fatalf("limit of a new session = %d, want a quarter of 128000", limit)
	}
	if _, err := h.GetSession(ctx, "brandnew"); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("the refused first write left session brandnew: %v", err)
	}

	sys := mustAppend(t, h, "fresh", &memory.Message{Role: memory.RoleSystem, Content: strings.Repeat("Follow every rule of the style guide. ", 12)}).IDs[0]
	window := 256
	if _, err := h.PutSession(ctx, "fresh", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, "fresh", &memory.Message{Role: memory.RoleUser, Content: "an unpinned question"})
	_, err = h.EditMessage(ctx, sys, memory.MessageEdit{Content: new(strings.Repeat("Follow every rule of the style guide. ", 13))})
	pinnedRefusal(t, err)
	if _, err := h.EditMessage(ctx, sys, memory.MessageEdit{Content: new("Follow the style guide.")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	pinnedTokens(t, h, "fresh")
}
