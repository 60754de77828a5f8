package memory

import "testing"

// A second result for one call (stored before writes were checked against
// each other) is left out of the call's unit, so no window sends it; the
// call with its first result stays whole.
func TestGroupUnitsSecondResultApart(t *testing.T) {
	t.Parallel()
	call := &Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Type: "function"}}}
	first := &Message{Role: RoleTool, ToolCallID: "c1", Content: "first"}
	second := &Message{Role: RoleTool, ToolCallID: "c1", Content: "second"}
	units := groupUnits([]*Message{call, first, second}, func(*Message) int { return 1 })
	if len(units) != 2 {
		t.Fatalf("units = %d, want 2", len(units))
	}
	if got := units[0].msgs; len(got) != 2 || got[1] != first || !units[0].complete() {
		t.Errorf("the call's unit = %v (complete %v), want the call and its first result", got, units[0].complete())
	}
	if units[1].msgs[0] != second || units[1].complete() {
		t.Errorf("the second result's unit = %v, complete %v: want it apart and never sent", units[1].msgs, units[1].complete())
	}
}
