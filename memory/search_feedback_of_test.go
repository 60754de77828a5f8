package memory

import (
	"slices"
	"testing"
)

// Feedback is learnt from what people and agents wrote, not from tools'
// outputs, and not at all when the best results are mostly tool outputs.
func TestFeedbackOf(t *testing.T) {
	res := func(roles ...Role) []SearchResult {
		var out []SearchResult
		for i, r := range roles {
			out = append(out, SearchResult{Message: &Message{ID: string(rune('a' + i)), Role: r, Content: string(rune('a' + i))}})
		}
		return out
	}
	for _, c := range []struct {
		best []SearchResult
		want []string
	}{
		{res(RoleUser, RoleAssistant, RoleUser), []string{"a", "b", "c"}},
		{res(RoleUser, RoleTool, RoleAssistant, RoleUser, RoleTool), []string{"a", "c", "d"}},
		{res(RoleTool, RoleUser, RoleTool, RoleAssistant), nil},
		{res(RoleTool, RoleTool, RoleUser), nil},
		{nil, nil},
	} {
		if got := feedbackOf(c.best); !slices.Equal(got, c.want) {
			t.Errorf("feedbackOf(%d results) = %v, want %v", len(c.best), got, c.want)
		}
	}
}
