package memory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// toolTurn is an assistant's call and the tool's result.
func toolTurn(i int, command, output string) []*memory.Message {
	id := fmt.Sprintf("call_%d", i)
	return []*memory.Message{
		{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: id, Type: "function",
			Function: memory.FunctionCall{Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, command)}}}},
		{Role: memory.RoleTool, ToolCallID: id, Content: output},
	}
}

// A query without a word the embedder knows ("9464") has the empty text's
// vector: every empty tool result was at vector similarity 1.0 with it and
// they filled the hybrid results after the one message that has the
// number. Such a query is ranked by its text.
func TestSearchUnknownWordsIgnoreEmptyMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := memorytest.Open(t)
	var msgs []*memory.Message
	for i := range 12 {
		msgs = append(msgs, toolTurn(i, fmt.Sprintf("touch build/out_%d", i), "")...)
	}
	msgs = append(msgs, &memory.Message{Role: memory.RoleUser, Content: "ticket 9464 is blocked on the review"})
	msgs = append(msgs, toolTurn(99, "echo done", " ")...)
	if _, err := h.Append(ctx, "s", msgs); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{memory.ModeHybrid, memory.ModeVector} {
		for _, query := range []string{"9464", "zzqx-9912"} {
			res, err := h.Search(ctx, memory.SearchRequest{Query: query, Sessions: []string{"s"}, K: 10, Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Role == memory.RoleTool {
					t.Errorf("%s %q: result %d is an empty tool result (vector %.2f)", mode, query, i+1, r.VectorScore)
				}
			}
			if query == "9464" && mode == memory.ModeHybrid && (len(res) == 0 || res[0].Content != "ticket 9464 is blocked on the review") {
				t.Errorf("%s %q: the message with the number is not first: %d results", mode, query, len(res))
			}
		}
	}
}

// In a search of a session, a turn gains a share of its neighbours' scores:
// the answer to a matched question ranks above turns that share a word of
// it, and says so in NeighborScore.
func TestSearchNeighbourTurnsRank(t *testing.T) {
	t.Parallel()
	msgs := chat(
		"This week was long, the garden needed water every day.",
		"Sounds like a busy week.",
		"Who takes the pager for the on-call rotation this week?",
		"Dana does, until Friday morning.",
		"Next week I visit my sister in Porto.",
		"Enjoy the trip and the pastries.",
		"The rotation of the tyres is due this month.",
		"Book the garage early.",
	)
	res := searchChat(t, msgs, "who is on call for the rotation this week", 3)
	var got []string
	for _, r := range res {
		got = append(got, fmt.Sprintf("%q %.2f (+%.2f)", r.Content, r.Score, r.NeighborScore))
	}
	if len(res) < 2 || res[1].Content != "Dana does, until Friday morning." || res[1].NeighborScore <= 0 {
		t.Errorf("the answer is not second, brought up by its question: %v", got)
	}
}

// A question that names one of a conversation's speakers ranks that
// speaker's answer above the other speaker's turn that shares more of its
// words, names included.
func TestSearchNamedAuthorFirst(t *testing.T) {
	t.Parallel()
	turn := func(name, text string) *memory.Message {
		role := memory.RoleUser
		if name == "Bruno" {
			role = memory.RoleAssistant
		}
		return &memory.Message{Role: role, Name: name, Content: text}
	}
	msgs := []*memory.Message{
		turn("Alma", "Morning! The bus was late again today."),
		turn("Bruno", "Alma, you mentioned the garden: do you grow anything in the garden this year, Alma?"),
		turn("Alma", "Not sure yet, the weather has been odd."),
		turn("Bruno", "My brother moved to Lisbon last month."),
		turn("Alma", "I grow tomatoes and basil in the garden."),
		turn("Bruno", "The football match ran late yesterday."),
		turn("Alma", "I finished the novel about the lighthouse."),
		turn("Bruno", "We should meet for lunch next week."),
	}
	res := searchChat(t, msgs, "What does Alma grow in her garden?", 3)
	var got []string
	for _, r := range res {
		got = append(got, fmt.Sprintf("%s %q %.2f (x%.1f)", r.Name, r.Content, r.Score, r.AuthorWeight))
	}
	if len(res) < 2 || res[0].Content != "I grow tomatoes and basil in the garden." || res[0].AuthorWeight != 1 {
		t.Fatalf("Alma's answer is not first: %v", got)
	}
	for _, r := range res {
		if want := map[string]float64{"Alma": 1, "Bruno": 0.6}[r.Name]; r.AuthorWeight != want {
			t.Errorf("%s's result has author weight %v, want %v", r.Name, r.AuthorWeight, want)
		}
	}
}

// searchChat stores msgs as session "chat" of a new service and answers a
// hybrid search of it for query.
func searchChat(t *testing.T, msgs []*memory.Message, query string, k int) []memory.SearchResult {
	t.Helper()
	ctx := context.Background()
	h := memorytest.Open(t)
	if _, err := h.Append(ctx, "chat", msgs); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := h.Search(ctx, memory.SearchRequest{Query: query, Sessions: []string{"chat"}, K: k})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A question that asks when ranks the turn that states a time above one
// that matches its words as well but says no time, and says so in
// WhenScore; a question that does not ask when adds nothing.
func TestSearchWhenStatesTime(t *testing.T) {
	t.Parallel()
	msgs := chat(
		"Moving to Porto was a good move, the harbour is lovely.",
		"The pastries alone are worth it.",
		"My sister keeps bees on her roof, far from Porto, up in the hills where the summers are long and dry.",
		"Does the honey taste of the flowers there, or of the pine trees along the road to Porto?",
		"We moved to Porto last spring, after the wedding.",
		"A busy season for you.",
	)
	const timed = "We moved to Porto last spring, after the wedding."
	res := searchChat(t, msgs, "When did you move to Porto?", 3)
	var got []string
	for _, r := range res {
		got = append(got, fmt.Sprintf("%q %.2f (+%.2f)", r.Content, r.Score, r.WhenScore))
	}
	if len(res) == 0 || res[0].Content != timed || res[0].WhenScore <= 0 {
		t.Errorf("the turn that says when is not first: %v", got)
	}
	for _, r := range searchChat(t, msgs, "Did you move to Porto?", 3) {
		if r.WhenScore != 0 {
			t.Errorf("%q gained %.2f for a question that does not ask when", r.Content, r.WhenScore)
		}
	}
}

// chat is a conversation of texts, the user's and the assistant's in turn.
func chat(texts ...string) []*memory.Message {
	msgs := make([]*memory.Message, len(texts))
	for i, text := range texts {
		role := memory.RoleUser
		if i%2 == 1 {
			role = memory.RoleAssistant
		}
		msgs[i] = &memory.Message{Role: role, Content: text}
	}
	return msgs
}
