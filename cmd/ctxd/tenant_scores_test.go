package main

import (
	"fmt"
	"math"
	"testing"
)

// One tenant's writes do not move another's search scores (issue 14): after
// tenant b wrote a's rare word 20 times, a's own note with that word fell
// from first to last in a's text search, so a could read b's writes from its
// rankings. Through the API, a's results must stay exactly what they were.
func TestSearchScoresPerTenant(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	a, b := ts.as(keyA), ts.as(keyB)
	// One write, so one index segment: Bleve's average field length is
	// the sum of each segment's distinct terms over the documents, which
	// merges move whoever's writes cause them (see tenantStats).
	note := "remember the zyzzyva password rotation for the billing cluster before friday's audit window"
	notes := []map[string]any{msg("user", note)}
	for i, s := range []string{"deploy done", "deploy of the api failed", "the deploy went fine", "deploy again tomorrow morning",
		"we deploy on fridays now"} {
		notes = append(notes, msg("assistant", fmt.Sprintf("%s (%d)", s, i)))
	}
	a.store("notes", notes...)
	query := map[string]any{"query": "zyzzyva deploy", "mode": "text", "k": 40}
	scores := func() (map[string]float64, string) {
		t.Helper()
		res := a.search(query)
		if len(res) == 0 {
			t.Fatal("a's search found nothing")
		}
		out := map[string]float64{}
		for _, r := range res {
			out[r.ID] = r.Score
		}
		return out, res[0].Content
	}
	before, first := scores()
	if first != note {
		t.Fatalf("a's note is not first before b writes: %q", first)
	}

	for range 20 {
		b.store("probe", msg("user", "zyzzyva zyzzyva probe"))
	}
	for i := range 40 {
		b.store("chatter", msg("user", chatter(i)))
	}
	after, first := scores()
	if first != note {
		t.Fatalf("a's note is not first after b wrote the word: %q", first)
	}
	if len(after) != len(before) {
		t.Fatalf("a's search found %d messages after b wrote, %d before", len(after), len(before))
	}
	for id, s := range before {
		if math.Abs(after[id]-s) > 1e-9 {
			t.Fatalf("a's score of %s moved from %v to %v when b wrote", id, s, after[id])
		}
	}
}
