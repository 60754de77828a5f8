package memory

import (
	"math"
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
		var got []string
		for _, x := range feedbackOf(c.best) {
			got = append(got, x.Content)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("feedbackOf(%d results) = %v, want %v", len(c.best), got, c.want)
		}
	}
}

// The feedback vector is the query's plus the weight times the mean of the
// results' vectors, of length 1.
func TestRocchio(t *testing.T) {
	got := rocchio([]float32{1, 0, 0}, [][]float32{{0, 1, 0}, {0, 0.6, 0.8}}, 1)
	// (1, 0.8, 0.4) / 1.34...
	n := math.Sqrt(1 + 0.64 + 0.16)
	for i, want := range []float64{1 / n, 0.8 / n, 0.4 / n} {
		if math.Abs(float64(got[i])-want) > 1e-6 {
			t.Fatalf("rocchio = %v, want (1, 0.8, 0.4)/%.4f", got, n)
		}
	}
}
