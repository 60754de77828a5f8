package ui

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// The timeline is drawn write by write: a burst of writes after an idle day
// spreads over the whole width (drawn to the clock, it was a sliver at the
// right end), each compaction stays apart from the next, and the axis says
// what it is.
func TestTimelineByWrite(t *testing.T) {
	day := time.Date(2025, 1, 15, 9, 0, 0, 0, time.UTC)
	hist := &memory.SessionHistory{Points: []memory.TokenPoint{{At: day, Tokens: 100}}}
	burst := day.Add(24 * time.Hour)
	tokens := 100
	for i := range 300 {
		at := burst.Add(time.Duration(i) * 100 * time.Millisecond)
		tokens += 50
		if i%10 == 9 { // a compaction every ten writes
			hist.Points = append(hist.Points, memory.TokenPoint{At: at, Tokens: tokens})
			after := at.Add(10 * time.Millisecond)
			hist.Compactions = append(hist.Compactions, memory.CompactionRecord{StartedAt: at, At: after, TokensBefore: tokens, TokensAfter: 500})
			tokens = 500
			hist.Points = append(hist.Points, memory.TokenPoint{At: after, Tokens: tokens})
			continue
		}
		hist.Points = append(hist.Points, memory.TokenPoint{At: at, Tokens: tokens})
	}
	st := &memory.Status{ContextWindow: 4000, Policy: memory.DefaultPolicy}
	out := string(timelineSVG(hist, st))

	// The compactions' before markers, left to right.
	var xs []float64
	for _, m := range regexp.MustCompile(`<circle cx="([0-9.]+)" cy="[0-9.]+" r="([0-9.]+)" fill="#6b46c1"`).FindAllStringSubmatch(out, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		xs = append(xs, x)
	}
	if len(xs) != 30 {
		t.Fatalf("%d compaction markers, want 30", len(xs))
	}
	plotW := chartW - padL - padR
	if first := xs[0] - padL; first > plotW/20 {
		t.Errorf("the first compaction of the burst is drawn %.0f px into a %.0f px plot: the idle day takes the width", first, plotW)
	}
	for i := 1; i < len(xs); i++ {
		if gap := xs[i] - xs[i-1]; gap < 10 {
			t.Errorf("compactions %d and %d are %.1f px apart", i-1, i, gap)
		}
	}
	if !strings.Contains(out, "writes and compactions in order") || !strings.Contains(out, "not to time scale") {
		t.Error("the axis is not named")
	}
}
