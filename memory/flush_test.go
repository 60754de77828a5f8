package memory_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// An agent with large tool outputs on a 16,000-token window that saves
// notes whenever a write answer reads flush_due, as much as the answer
// says there is room for, and makes room when told the notes are full:
//   - flush_due comes once per compaction cycle, always with its prompt and
//     the room left for notes;
//   - the agent is never refused for its notes (409), however long it runs;
//   - compactions stay rare: one that cannot get under the trigger (the
//     recent outputs are protected) holds the next until the window grows,
//     instead of compacting again on every write.
func TestObedientAgentLongRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("150 steps")
	}
	h := memorytest.Open(t)
	ctx := context.Background()
	window := 16000
	if _, err := h.PutSession(ctx, "a", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, "a", &memory.Message{Role: memory.RoleSystem, Content: "You are a coding agent.", Pinned: true},
		&memory.Message{Role: memory.RoleUser, Content: "Make the payments tests pass."})
	rng := rand.New(rand.NewSource(1))
	note := func(i, k int) string {
		return fmt.Sprintf("note %d-%d: ", i, k) + strings.Repeat(fmt.Sprintf("the handler table in src/mod_%d.py still fails test_%d; ", i, k), 8)
	}
	var notes []string // ids of the agent's pinned notes, oldest first
	stored, flushes, full := 2, 0, 0
	pol := memory.DefaultPolicy
	trigger, hard, band := int(pol.TriggerPct*float64(window)), int(pol.MaxPct*float64(window)), int((pol.TriggerPct-pol.TargetPct)*float64(window))
	// A compaction that leaves the window over the trigger holds the next
	// until the window grows a band or keep_recent messages come: the
	// session was compacted again on the very next write, every write.
	var held *memory.CompactionReport
	heldAt := 0
	compacted := func(c *memory.CompactionReport) {
		if c == nil || c.DryRun {
			return
		}
		if held != nil && c.TokensBefore < hard && c.TokensBefore < held.TokensAfter+band && stored-heldAt < pol.KeepRecent {
			t.Errorf("compacted at %d tokens, %d messages after one that left %d", c.TokensBefore, stored-heldAt, held.TokensAfter)
		}
		held, heldAt = nil, stored
		if c.TokensAfter >= trigger {
			held = c
		}
	}
	cycles := map[int]int{} // compactions so far -> flush_due answers in that cycle
	for i := 0; i < 150; i++ {
		lines := 5 + rng.Intn(60)
		if rng.Intn(4) == 0 {
			lines = 200 + rng.Intn(300) // a very large output, now and then
		}
		res := mustAppend(t, h, "a", step(i, codeOutput(i, lines))...)
		stored += 2
		compacted(res.Compaction)
		st := res.Session
		if (st.State == memory.WindowFlushDue) != (st.FlushPrompt != "") {
			t.Fatalf("step %d: state %s with flush_prompt %q: one signal, both or neither", i, st.State, st.FlushPrompt)
		}
		if st.FlushPrompt == "" {
			continue
		}
		flushes++
		cycles[st.Compactions]++
		if cycles[st.Compactions] > 1 {
			t.Fatalf("step %d: flush_due for the %d. time in compaction cycle %d", i, cycles[st.Compactions], st.Compactions)
		}
		if st.NoteRoom == nil {
			t.Fatalf("step %d: a flush prompt without the room for notes", i)
		}
		if st.FlushPrompt == memory.FlushPromptFull {
			// make room as told: unpin the oldest half of the notes
			full++
			for _, id := range notes[:len(notes)/2] {
				unpin := false
				if _, err := h.EditMessage(ctx, id, memory.MessageEdit{Pinned: &unpin}); err != nil {
					t.Fatalf("step %d: unpin a note: %v", i, err)
				}
			}
			notes = notes[len(notes)/2:]
			continue
		}
		room := *st.NoteRoom
		for k := 0; k < 3; k++ {
			m := &memory.Message{Role: memory.RoleUser, Pinned: true, Content: note(i, k)}
			cost, err := memory.MessageTokens(h.Tokenizer, memory.EncodingO200k, m)
			if err != nil {
				t.Fatal(err)
			}
			if cost > room {
				break
			}
			res, err := h.Append(ctx, "a", []*memory.Message{m})
			if err != nil {
				t.Fatalf("step %d: a note within the room the prompt gave (%d of %d tokens) was refused: %v", i, cost, room, err)
			}
			room -= cost
			notes = append(notes, res.IDs[0])
			stored++
			compacted(res.Compaction)
		}
	}
	st, err := h.GetSession(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if full == 0 {
		t.Errorf("the notes never filled their budget: the test does not reach the case it is for")
	}
	if flushes > st.Compactions+1 {
		t.Errorf("%d flush prompts for %d compactions", flushes, st.Compactions)
	}
	// Measured: 42 compactions (10.4 per 100 messages) without the hold,
	// 33 (8.5) with it.
	if per100 := 100 * float64(st.Compactions) / float64(stored); per100 > 10 {
		t.Errorf("%d compactions for %d messages: %.1f per 100", st.Compactions, stored, per100)
	}
}

// A compaction that can free nothing (every message left is protected)
// says so and holds automatic compactions until the window has grown a
// band; past the hard limit nothing waits.
func TestCompactionThatFreesNothingHolds(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	window := 16000
	if _, err := h.PutSession(ctx, "h", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	// Four recent messages, protected, that take the window past the
	// trigger (8,000) by themselves; the third is told to flush.
	big := func(i int) string {
		return strings.Repeat(fmt.Sprintf("module %d handles refunds and their ledger entries; ", i), 200)
	}
	mustAppend(t, h, "h", &memory.Message{Role: memory.RoleUser, Content: "Review the modules."})
	var res *memory.AppendResult
	for i := 0; i < 4; i++ {
		role := memory.RoleAssistant
		if i%2 == 1 {
			role = memory.RoleUser
		}
		res = mustAppend(t, h, "h", &memory.Message{Role: role, Content: big(i)})
	}
	first := res.Compaction
	if first == nil {
		t.Fatalf("no compaction at %d tokens of %d", res.Session.Tokens, window)
	}
	if len(first.Dropped)+len(first.Summarized) != 0 || !strings.Contains(strings.Join(first.Notes, " "), "nothing could be freed") {
		t.Fatalf("compaction %+v: want one that frees nothing and says why", first)
	}
	// Small writes: the window grows less than the band (trigger to
	// target: 2,400 tokens): no compaction runs again.
	for i := 0; i < 4; i++ {
		res = mustAppend(t, h, "h", &memory.Message{Role: memory.RoleUser, Content: fmt.Sprintf("ok %d", i)})
		if res.Compaction != nil {
			t.Fatalf("write %d: compacted again at %d tokens (held at %d)", i, res.Session.Tokens, first.TokensBefore)
		}
	}
	// Past the hard limit nothing waits.
	res = mustAppend(t, h, "h", &memory.Message{Role: memory.RoleUser, Content: big(7)}, &memory.Message{Role: memory.RoleAssistant, Content: big(8)},
		&memory.Message{Role: memory.RoleUser, Content: big(9)})
	if res.Session.Tokens > int(0.85*float64(window)) {
		t.Fatalf("the window holds %d tokens, over the hard limit", res.Session.Tokens)
	}
	if res.Compaction == nil {
		t.Errorf("a write to %d tokens did not compact", res.Session.Tokens)
	}
}
