package index

import (
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// A time filter may name any time RFC 3339 can write; Bleve's date field
// holds 1677-2262 only, and refused a range beyond it (a 500 for the client).
func TestSearchFarDates(t *testing.T) {
	x := openTest(t, Options{})
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{
		msg("t", "s", "m1", "the comet passed at dawn", 1),
		msg("t", "s", "m2", "a comet tail over the hills", 2),
	}})
	day := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	year1, year9999 := day("0001-01-02T00:00:00Z"), day("9999-12-31T23:59:59Z")
	for _, c := range []struct {
		name         string
		since, until time.Time
		want         int
	}{
		{"since year 1", year1, time.Time{}, 2},
		{"until year 9999", time.Time{}, year9999, 2},
		{"year 1 to 9999", year1, year9999, 2},
		{"since year 9999", year9999, time.Time{}, 0},
		{"until year 1", time.Time{}, year1, 0},
		{"year 1 to before t0", year1, t0.Add(-time.Hour), 0},
		{"t0 to year 9999", t0, year9999, 2},
		{"after t0 to year 9999", t0.Add(time.Second), year9999, 0},
	} {
		for _, mode := range []string{memory.ModeText, memory.ModeHybrid} {
			q := memory.SearchQuery{Tenant: "t", Text: "comet", Mode: mode, Since: c.since, Until: c.until, K: 10}
			if mode == memory.ModeHybrid {
				q.Vector = topicVec(1)
			}
			hits, err := x.Search(t.Context(), q)
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, mode, err)
			}
			if len(hits) != c.want {
				t.Errorf("%s %s: %d hits %v, want %d", c.name, mode, len(hits), ids(hits), c.want)
			}
		}
	}
}

// A range from before the Unix epoch to after it finds what it spans.
// Bleve enumerated such a range term by term when both ends were set (-27 s
// to +33 s ran for minutes: the fuzz input in testdata hangs without the
// split in dateFilter).
func TestSearchAcrossTheEpoch(t *testing.T) {
	x := openTest(t, Options{})
	at := func(id string, sec int64) *memory.Message {
		m := msg("t", "s", id, "the comet at "+id, 1)
		m.CreatedAt = time.Unix(sec, 0).UTC()
		return m
	}
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{
		at("before", -10), at("epoch", 0), at("after", 10), at("later", 1000), at("earlier", -1000)}})
	for _, c := range []struct {
		since, until int64
		want         []string
	}{
		{-27, 33, []string{"before", "epoch", "after"}},
		{-27, 0, []string{"before", "epoch"}},
		{-10, -10, []string{"before"}},
		{0, 10, []string{"epoch", "after"}},
		{-5000, 5000, []string{"earlier", "before", "epoch", "after", "later"}},
		{-1, 1, []string{"epoch"}},
	} {
		hits, err := x.Search(t.Context(), memory.SearchQuery{Tenant: "t", Text: "comet", Mode: memory.ModeText,
			Since: time.Unix(c.since, 0), Until: time.Unix(c.until, 0), K: 10})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(hits); !sameSet(got, c.want) {
			t.Errorf("%d..%d s: %v, want %v", c.since, c.until, got, c.want)
		}
	}
}
