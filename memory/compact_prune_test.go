package memory

import (
	"slices"
	"strings"
	"testing"
)

func TestToolCaps(t *testing.T) {
	t.Parallel()
	msg := func(role Role, tokens int) *Message { return &Message{Role: role, Tokens: tokens} }
	for _, tc := range []struct {
		name  string
		msgs  []*Message
		share int
		want  []int
	}{
		{"one result takes the share", []*Message{msg(RoleAssistant, 50), msg(RoleTool, 9000)}, 4000, []int{4000, 4000}},
		{"small results keep their cost, large ones split the rest",
			[]*Message{msg(RoleTool, 100), msg(RoleTool, 5000), msg(RoleTool, 5000)}, 4000, []int{1333, 1950, 1950}},
		{"results of two calls do not share", []*Message{msg(RoleTool, 3000), msg(RoleAssistant, 10), msg(RoleTool, 3000)}, 4000, []int{4000, 4000, 4000}},
		{"five equal results", []*Message{msg(RoleTool, 4500), msg(RoleTool, 4500), msg(RoleTool, 4500), msg(RoleTool, 4500), msg(RoleTool, 4500)}, 4000, []int{800, 800, 800, 800, 800}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := toolCaps(tc.msgs, tc.share)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("caps %v, want %v", got, tc.want)
			}
			sum := 0
			for i, m := range tc.msgs {
				if m.Role == RoleTool {
					sum += min(m.Tokens, got[i])
				}
			}
			if tc.name != "results of two calls do not share" && sum > tc.share {
				t.Fatalf("results may cost %d together, over the share %d", sum, tc.share)
			}
		})
	}
}

func TestPruneLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		costs     PruneCosts
		scheduled int
		want      int
	}{
		{"new and small enough", PruneCosts{Trimmed: 800, Cleared: 30}, PruneNone, PruneNone},
		{"trim due", PruneCosts{Trimmed: 800, Cleared: 30}, PruneTrimmed, PruneTrimmed},
		{"clear due", PruneCosts{Trimmed: 800, Cleared: 30}, PruneCleared, PruneCleared},
		{"too short to trim stays whole until cleared", PruneCosts{Cleared: 30}, PruneTrimmed, PruneNone},
		{"cut from the start", PruneCosts{Trimmed: 800, Cleared: 30, Cut: 500}, PruneNone, PruneCut},
		{"a cut smaller than the trim stays cut", PruneCosts{Trimmed: 800, Cleared: 30, Cut: 500}, PruneTrimmed, PruneCut},
		{"the placeholder is smaller than the cut", PruneCosts{Trimmed: 800, Cleared: 30, Cut: 500}, PruneCleared, PruneCleared},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.costs.level(tc.scheduled); got != tc.want {
				t.Fatalf("level %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSalientLines(t *testing.T) {
	t.Parallel()
	text := strings.Join([]string{
		"total 12",
		"drwxr-xr-x  2 root root 4096 .",
		"-rw-r--r--  1 root root  120 setup.py",
		"django/db/models/query.py:42:    def _filter_or_exclude(self, negate, args, kwargs):",
		"    plain words only here",
		"    resultCache = None",
		"",
		"x = 1" + strings.Repeat(" filler", 80) + " the get_queryset call" + strings.Repeat(" tail", 80),
	}, "\n")
	got := salientLines(text)
	if len(got) != 4 {
		t.Fatalf("%d lines: %q", len(got), got)
	}
	if got[0] != "-rw-r--r--  1 root root  120 setup.py" || !strings.HasPrefix(got[1], "django/db/models/query.py:42:") || got[2] != "resultCache = None" {
		t.Fatalf("lines %q", got[:3])
	}
	if long := got[3]; len(long) > 2*nameContext+20 || !strings.Contains(long, "the get_queryset call") {
		t.Fatalf("a long line is not cut around its name: %d bytes %q", len(long), long)
	}
	names := func(l string) (out []string) {
		for _, n := range lineNames(l) {
			out = append(out, l[n.start:n.end])
		}
		return out
	}
	for line, want := range map[string][]string{
		"see config.DEBUG_MODE and a.b.some_name": {"DEBUG_MODE", "some_name"},
		"import os, sys":                          nil,
		"edit src/app/views.py then run tox.ini":  {"src/app/views.py", "tox.ini"},
		"getUserName() and __init__ and MAX_SIZE": {"getUserName", "MAX_SIZE"},
	} {
		if got := names(line); !slices.Equal(got, want) {
			t.Errorf("names of %q: %q, want %q", line, got, want)
		}
	}
}

func TestSplitSections(t *testing.T) {
	t.Parallel()
	m := &Message{Content: "a" + sectionSep + "b" + sectionSep + "c", Sources: []string{"1", "2", "3", "4"},
		Metadata: map[string]any{metaSections: "1,2,1"}}
	secs, sizes := splitSections(m)
	if !slices.Equal(secs, []string{"a", "b", "c"}) || !slices.Equal(sizes, []int{1, 2, 1}) {
		t.Fatalf("%q %v", secs, sizes)
	}
	// a summary written before summaries rolled is one section
	m.Metadata = nil
	secs, sizes = splitSections(m)
	if len(secs) != 1 || sizes[0] != 4 {
		t.Fatalf("legacy: %q %v", secs, sizes)
	}
}
