package memory

import (
	"fmt"
	"testing"
)

// Validating a history whose first messages were validated before answers
// what validating all of it answers: a new result that answers a call the
// known part answered already is refused with the same message, a call
// numbered again after its result is answered again, and a result whose
// call is new is read without going back through the known part.
func TestValidateMessagesFromKnown(t *testing.T) {
	sys := &Message{Role: RoleSystem, Content: "You are a coding agent."}
	user := &Message{Role: RoleUser, Content: "go"}
	calls := func(ids ...string) *Message {
		m := &Message{Role: RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: "ls", Arguments: "{}"}})
		}
		return m
	}
	result := func(id string) *Message { return &Message{Role: RoleTool, ToolCallID: id, Content: "out " + id} }
	for _, c := range []struct {
		name    string
		history []*Message
		refused bool
	}{
		{"each call answered once", []*Message{sys, user, calls("a"), result("a"), calls("b", "c"), result("b"), result("c"), sys}, false},
		{"a known result answered again", []*Message{sys, user, calls("a"), result("a"), user, result("a")}, true},
		{"a new result answered again", []*Message{sys, user, calls("a"), result("a"), calls("b"), result("b"), result("b")}, true},
		{"a call numbered again", []*Message{sys, user, calls("a"), result("a"), calls("a"), result("a")}, false},
		{"a result of no call, twice", []*Message{user, result("x"), user, result("x")}, true},
		{"an old call answered late", []*Message{user, calls("a", "b"), result("a"), user, result("b")}, false},
	} {
		want := fmt.Sprint(validateMessagesFrom(c.history, 0, DefaultLimits))
		if (want != "<nil>") != c.refused {
			t.Fatalf("%s: validated whole: %s", c.name, want)
		}
		known := 0
		for i, m := range c.history {
			if m.IsStandingSystem() {
				continue
			}
			known++
			if err := validateMessagesFrom(c.history[:i+1], 0, DefaultLimits); err != nil {
				break // the known part is one validated before
			}
			if got := fmt.Sprint(validateMessagesFrom(c.history, known, DefaultLimits)); got != want {
				t.Errorf("%s, the first %d known: %s, want %s", c.name, known, got, want)
			}
		}
	}
}
