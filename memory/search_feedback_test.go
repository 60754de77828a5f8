package memory_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// A question whose answer is in two turns far apart, one with the
// question's words and one without them but with that one's rarer words,
// finds both: the search learns the rarer words from its first best
// results (pseudo-relevance feedback) and says so on the result. Text
// mode, the literal match, does not.
func TestSearchFeedbackFindsSecondFact(t *testing.T) {
	const fact = "The Marrowfield guild wants my paper lanterns for their parade!"
	ctx := context.Background()
	h := feedbackSession(t, memorytest.Open(t))
	search := func(h *memorytest.Harness, mode string) []memory.SearchResult {
		res, err := h.Search(ctx, memory.SearchRequest{Query: "What new hobby did Odile take up?", Sessions: []string{"club"}, K: 5, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := search(h, memory.ModeHybrid)
	i := slices.IndexFunc(res, func(x memory.SearchResult) bool { return x.Content == fact })
	if i < 0 {
		for _, x := range res {
			t.Logf("%.3f %v %q", x.Score, x.Feedback, x.Content)
		}
		t.Fatal("the second fact is not in the top 5 (without feedback: 61st)")
	}
	if !slices.Contains(res[i].Feedback, "marrowfield") {
		t.Errorf("its feedback terms %v do not name the word it was found by", res[i].Feedback)
	}
	for _, x := range search(h, memory.ModeText) {
		if x.Content == fact || len(x.Feedback) > 0 {
			t.Errorf("text mode used feedback: %v %q", x.Feedback, x.Content)
		}
	}
	off := feedbackSession(t, memorytest.Open(t, func(s *memory.Service) { s.NoFeedback = true }))
	for _, x := range search(off, memory.ModeHybrid) {
		if x.Content == fact || len(x.Feedback) > 0 {
			t.Errorf("NoFeedback used feedback: %v %q", x.Feedback, x.Content)
		}
	}
}

// feedbackSession writes the session "club" of TestSearchFeedbackFindsSecondFact.
func feedbackSession(t *testing.T, h *memorytest.Harness) *memorytest.Harness {
	t.Helper()
	ctx := context.Background()
	window := 5_000_000 // everything stays in the window: this is about search
	if _, err := h.PutSession(ctx, "club", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	chatter := []string{"How was the bus this morning?", "The kettle broke again, typical.", "Did you see the match last night?",
		"I need to sort the laundry before dinner.", "Traffic was awful on the bridge.", "My phone keeps losing signal.",
		"We should repaint the fence one day.", "The bakery ran out of rye bread.", "Lovely to hear from you!",
		"Work was long but fine.", "The cat knocked over a plant.", "Rain all afternoon, stayed in."}
	var msgs []*memory.Message
	add := func(name, text string) {
		role := memory.RoleUser
		if name == "Fenwick" {
			role = memory.RoleAssistant
		}
		msgs = append(msgs, &memory.Message{Role: role, Name: name, Content: text})
	}
	for i := range 120 {
		name := []string{"Odile", "Fenwick"}[i%2]
		switch i {
		case 10:
			add(name, "Big news: my new hobby is the Marrowfield lantern guild, we build paper lanterns.")
		case 90:
			add(name, "The Marrowfield guild wants my paper lanterns for their parade!")
		default:
			add(name, fmt.Sprintf("%s (%d)", chatter[i%len(chatter)], i))
		}
	}
	if _, err := h.Append(ctx, "club", msgs); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}
