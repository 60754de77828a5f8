package memory_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// mustMessage is Message, failing the test on an error.
func mustMessage(t *testing.T, svc *memory.Service, id string) *memory.Message {
	t.Helper()
	m, err := svc.Message(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mustEdit is EditMessage, failing the test on an error.
func mustEdit(t *testing.T, svc *memory.Service, id string, e memory.MessageEdit) *memory.EditResult {
	t.Helper()
	res, err := svc.EditMessage(context.Background(), id, e)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// brief is what a failure shows of m: its fields but the vector.
func brief(m *memory.Message) string {
	if m == nil {
		return "<nil>"
	}
	c := *m
	c.Vector = nil
	if c.Cold != nil {
		return fmt.Sprintf("%+v cold %+v", c, *c.Cold)
	}
	return fmt.Sprintf("%+v", c)
}

// textHits is the ids a text search of session finds, best first, with
// their states.
func textHits(t *testing.T, svc *memory.Service, session, query string) (ids []string, states []memory.State) {
	t.Helper()
	res, err := svc.Search(context.Background(), memory.SearchRequest{Query: query, Sessions: []string{session}, Mode: "text", K: 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		ids, states = append(ids, r.ID), append(states, r.State)
	}
	return ids, states
}

// An edit of content is counted and embedded again, the index follows it
// (the new words find the message, the old ones only its earlier version,
// kept cold for the session's retention), the window has the message as it
// is now, the edit is logged with what changed, and an earlier version
// asked for comes back at its message's place. cmd/ctxd's
// TestEditMessageContent checks what a restart, the cold mirror and the
// offline verify find of an edit.
func TestEditMessageContent(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t, memorytest.WithEvents(t))
	ctx := context.Background()
	// The harness's clock starts on a Friday, and the index adds each
	// message's date words to its text: a day later, "Friday" is only the
	// message's own word.
	h.Clock.Add(24 * time.Hour)
	res := mustAppend(t, h, "e",
		&memory.Message{Role: memory.RoleSystem, Content: "You are a deployment assistant.", Pinned: true},
		&memory.Message{Role: memory.RoleUser, Content: "The staging database password rotates every Friday.", Metadata: map[string]any{"src": "chat"}},
		&memory.Message{Role: memory.RoleAssistant, Content: "Noted: the password rotates weekly."})
	ids := res.IDs
	u := ids[1]
	before := mustMessage(t, h.Service, u)
	h.Clock.Add(time.Minute)
	newText := "The staging database password rotates every Monday at noon, after the backup window."
	edit := mustEdit(t, h.Service, u, memory.MessageEdit{Content: &newText})
	got := edit.Message
	if got.Content != newText || got.ID != u || got.State != memory.StateActive || !got.CreatedAt.Equal(before.CreatedAt) ||
		!slices.Equal(edit.Changed, []string{"content"}) {
		t.Fatalf("edited message = %s, changed %v", brief(got), edit.Changed)
	}
	exact, err := memory.MessageTokens(h.Tokenizer, memory.EncodingO200k, &memory.Message{Role: got.Role, Content: got.Content})
	if err != nil || got.Tokens != exact || exact == before.Tokens {
		t.Fatalf("edited message has %d tokens, exact count %d (before %d, %v)", got.Tokens, exact, before.Tokens, err)
	}
	if len(got.Versions) != 1 || edit.Previous == nil || got.Versions[0] != edit.Previous.ID {
		t.Fatalf("edited message lists versions %v, the edit kept %s", got.Versions, brief(edit.Previous))
	}
	v := got.Versions[0]
	old := mustMessage(t, h.Service, v)
	if old.Content != before.Content || old.State != memory.StateDropped || old.Kind != memory.KindVersion || old.VersionOf != u ||
		old.Tokens != before.Tokens || old.Role != memory.RoleUser || old.Pinned || old.Metadata["src"] != "chat" {
		t.Fatalf("earlier version = %s", brief(old))
	}

	// The cold listing shows the earlier version, recoverable for the
	// session's recoverable_for_days (30 by default).
	cold, _, err := h.ListCold(ctx, "e", "", 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	var chunk *memory.Message
	for _, c := range cold {
		if c.ID == v {
			chunk = c
		}
	}
	if chunk == nil || chunk.Cold == nil || chunk.Cold.DropReason != memory.ReasonEdited {
		t.Fatalf("cold chunk of the earlier version = %s", brief(chunk))
	}
	if d := chunk.Cold.RecoverableUntil.Sub(h.Clock.Now()); d != 30*24*time.Hour {
		t.Fatalf("recoverable_until %v is %v away, want 30 days", chunk.Cold.RecoverableUntil, d)
	}

	// Logged with what changed and the tokens before and after.
	evs, err := h.TailEvents(ctx, memory.EventQuery{Stream: "edits", SessionID: "e"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0]["op"] != "edit" || evs[0]["message"] != u || fmt.Sprint(evs[0]["changed"]) != "[content]" ||
		fmt.Sprint(evs[0]["tokens_before"]) != fmt.Sprint(before.Tokens) || fmt.Sprint(evs[0]["tokens_after"]) != fmt.Sprint(got.Tokens) ||
		evs[0]["previous_version"] != v {
		t.Fatalf("edit events = %v", evs)
	}

	// The index follows: the new words find the message, the old ones only
	// the earlier version.
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if hits, _ := textHits(t, h.Service, "e", "Monday backup"); len(hits) == 0 || hits[0] != u {
		t.Fatalf("the new words find %v, want %s first", hits, u)
	}
	if hits, states := textHits(t, h.Service, "e", "Friday"); len(hits) != 1 || hits[0] != v || states[0] != memory.StateDropped {
		t.Fatalf("the old words find %v %v, want only the earlier version %s", hits, states, v)
	}
	// The window has the message as it is now, never the version.
	w, err := h.Context(ctx, "e", memory.ContextRequest{Prompt: "when does the password rotate, Friday?"})
	if err != nil {
		t.Fatal(err)
	}
	var contents []string
	for _, m := range w.Messages {
		contents = append(contents, m.Content)
	}
	if joined := strings.Join(contents, "|"); !strings.Contains(joined, "Monday") || strings.Contains(joined, "Friday") {
		t.Fatalf("window = %v", contents)
	}

	// A second edit keeps both earlier versions, oldest first; pinned and
	// metadata change without a new version.
	third := mustEdit(t, h.Service, u, memory.MessageEdit{Content: new("It rotates on the first of the month."),
		Important: new(true), Metadata: map[string]any{"src": "chat", "n": 2}, SetMetadata: true}).Message
	if vs := third.Versions; len(vs) != 2 || vs[0] != v || !third.Important || fmt.Sprint(third.Metadata["n"]) != "2" {
		t.Fatalf("after a second edit = %s", brief(third))
	}
	flags := mustEdit(t, h.Service, ids[0], memory.MessageEdit{Pinned: new(false)})
	if flags.Message.Pinned || flags.Message.Versions != nil || flags.Previous != nil || flags.Message.Content != "You are a deployment assistant." {
		t.Fatalf("unpinned = %s, kept %s", brief(flags.Message), brief(flags.Previous))
	}
	// Changing nothing is answered, and not logged.
	if again := mustEdit(t, h.Service, ids[0], memory.MessageEdit{Pinned: new(false)}); len(again.Changed) != 0 {
		t.Fatalf("an edit that changes nothing changed %v", again.Changed)
	}
	if evs, err = h.TailEvents(ctx, memory.EventQuery{Stream: "edits", SessionID: "e"}); err != nil || len(evs) != 3 {
		t.Fatalf("%d edit events (%v), want 3", len(evs), err)
	}

	// Asked for, an earlier version comes back at its message's place in
	// the conversation (the window builder does not order the two among
	// themselves), not after the turns that followed.
	if _, err := h.Recover(ctx, "e", v, "", 0); err != nil {
		t.Fatal(err)
	}
	w, err = h.Context(ctx, "e", memory.ContextRequest{Prompt: "what rotates?"})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, m := range w.Messages {
		order = append(order, m.ID)
	}
	if len(order) != 4 || order[0] != ids[0] || order[3] != ids[2] || !(order[1] == u && order[2] == v || order[1] == v && order[2] == u) {
		t.Fatalf("window order %v, want %s, then %s and %s, then %s", order, ids[0], u, v, ids[2])
	}
	pinnedTokens(t, h, "e") // exact tokens, and the harness's totals
}

// A deleted message leaves the store and the index with its earlier
// versions, a cold one too; the delete is logged with the tokens it freed,
// and the totals stay exact (the harness checks them at the end).
// cmd/ctxd's TestDeleteMessage checks the cold mirror, a restart and the
// offline verify.
func TestDeleteMessage(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t, memorytest.WithEvents(t))
	ctx := context.Background()
	window := 1500
	if _, err := h.PutSession(ctx, "d", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	ids := mustAppend(t, h, "d",
		&memory.Message{Role: memory.RoleSystem, Content: "You are terse.", Pinned: true},
		&memory.Message{Role: memory.RoleUser, Content: "My locker code is 4471 and the locker is by the okapi enclosure."},
		&memory.Message{Role: memory.RoleAssistant, Content: "I will remember the okapi locker."}).IDs
	secret := ids[1]
	v := mustEdit(t, h.Service, secret, memory.MessageEdit{Content: new("My locker code is 9902, by the okapi enclosure.")}).Previous.ID
	// Enough chatter to compact: some early turns go cold.
	for i := range 50 {
		h.Clock.Add(time.Minute)
		mustAppend(t, h, "d", &memory.Message{Role: []memory.Role{memory.RoleUser, memory.RoleAssistant}[i%2], Content: chatter(i)})
	}
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var cold string
	for _, m := range allMessages(t, h.Service, "d") {
		if m.State == memory.StateDropped && m.Kind != memory.KindVersion && cold == "" {
			cold = m.ID
		}
	}
	if cold == "" {
		t.Fatal("setup: nothing dropped")
	}
	coldText := mustMessage(t, h.Service, cold).Content

	if gone, err := h.DeleteMessage(ctx, secret, false); err != nil || !slices.Contains(gone, secret) || !slices.Contains(gone, v) {
		t.Fatalf("deleting %s (versions %s) deleted %v: %v", secret, v, gone, err)
	}
	if _, err := h.DeleteMessage(ctx, cold, false); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{secret, v, cold} {
		if _, err := h.Message(ctx, id); memory.ErrorCode(err) != memory.ENOTFOUND {
			t.Fatalf("deleted %s: %v, want not found", id, err)
		}
	}
	if _, err := h.DeleteMessage(ctx, secret, false); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("deleting %s again: %v, want not found", secret, err)
	}
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"okapi locker code", "4471", "9902", coldText} {
		res, err := h.Search(ctx, memory.SearchRequest{Query: q, Sessions: []string{"d"}, K: 50})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.ID == secret || r.ID == v || r.ID == cold {
				t.Fatalf("search %q still finds deleted %s", q, r.ID)
			}
		}
	}
	evs, err := h.TailEvents(ctx, memory.EventQuery{Stream: "edits", SessionID: "d"})
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	for _, e := range evs {
		if e["op"] == "delete" {
			deleted[fmt.Sprint(e["message"])] = true
			if fmt.Sprint(e["tokens_after"]) != "0" || fmt.Sprint(e["tokens_before"]) == "0" {
				t.Fatalf("delete event = %v", e)
			}
		}
	}
	if len(deleted) != 3 || !deleted[secret] || !deleted[v] || !deleted[cold] {
		t.Fatalf("delete events name %v", deleted)
	}
	pinnedTokens(t, h, "d")
}
