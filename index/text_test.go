package index

import (
	"context"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/ctxd/ctxd/memory"
)

// The name and date clauses are left out of a query none of whose words
// occurs in those fields, kept when one does, and leaving them out changes
// no ranking: the scores only scale by one factor.
func TestTextQueryLeavesOutEmptyClauses(t *testing.T) {
	x := openTest(t, Options{})
	a := msg("t", "s", "a", "the comet was bright over the harbour", 0)
	a.Name = "Marisol"
	b := msg("t", "s", "b", "a comet again, and another comet", 1)
	c := msg("t", "s", "c", "Marisol saw the harbour lights", 2)
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{a, b, c}, Watermark: 1})

	if occurs := x.fieldsWithAny("t", "comet harbour", fieldName, fieldWhen); occurs[fieldName] || occurs[fieldWhen] {
		t.Errorf("comet harbour occurs in %v", occurs)
	}
	if occurs := x.fieldsWithAny("t", "marisol comet", fieldName, fieldWhen); !occurs[fieldName] || occurs[fieldWhen] {
		t.Errorf("marisol comet occurs in %v", occurs)
	}
	// t0 is Sunday 7 May 2023, in the afternoon.
	if occurs := x.fieldsWithAny("t", "sunday comet", fieldName, fieldWhen); occurs[fieldName] || !occurs[fieldWhen] {
		t.Errorf("sunday comet occurs in %v", occurs)
	}

	for _, text := range []string{"comet harbour", "marisol harbour", "sunday comet"} {
		q := memory.SearchQuery{Tenant: "t", Text: text}
		pruned := bleveScores(t, x, q)
		full := scoresOf(t, x, bleve.NewDisjunctionQuery(clauseOn(text, tenantField(fieldText, "t"), 1), clauseOn(text, tenantField(fieldName, "t"), 1), clauseOn(text, tenantField(fieldWhen, "t"), 1)))
		if len(pruned) == 0 || !proportional(full, pruned) {
			t.Errorf("%q: scores %v, with every clause %v", text, pruned, full)
		}
	}
	if hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "marisol", Mode: memory.ModeText}); len(hits) != 2 {
		t.Errorf("marisol (name of a, text of c): %v", ids(hits))
	}
	// What occurs follows writes (the lookups are cached until one).
	d := msg("t", "s", "d", "no comet tonight", 3)
	d.Name = "Corinne"
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{d}, Watermark: 2})
	if occurs := x.fieldsWithAny("t", "corinne comet", fieldName, fieldWhen); !occurs[fieldName] {
		t.Errorf("after a write, corinne comet occurs in %v", occurs)
	}
	x.fieldsWithAny("t", "marisol", fieldName) // cached
	mustApply(t, x, memory.IndexBatch{Deletes: []*memory.Message{a}, Watermark: 3})
	if occurs := x.fieldsWithAny("t", "marisol", fieldName); occurs[fieldName] {
		t.Errorf("after a's delete, marisol occurs in %v", occurs)
	}
}

func clauseOn(text, field string, boost float64) *query.MatchQuery {
	m := bleve.NewMatchQuery(text)
	m.SetField(field)
	m.Analyzer = analyzerName
	m.SetBoost(boost)
	return m
}

func scoresOf(t *testing.T, x *Index, q query.Query) map[string]float64 {
	t.Helper()
	res, err := x.text.SearchInContext(context.Background(), bleve.NewSearchRequestOptions(q, 10, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, h := range res.Hits {
		out[h.ID] = h.Score
	}
	return out
}

// Text mode is the literal match: the date words of when a message was
// written (t0 is Sunday 7 May 2023, in the afternoon) are no content, so a
// text search for them finds only messages that say them. A hybrid query
// that speaks of time still reaches them through the date field.
func TestTextModeIgnoresDateWords(t *testing.T) {
	x := openTest(t, Options{})
	said := msg("t", "s", "said", "the comet review moved to sunday", 0)
	other := msg("t", "s", "other", "the comet review is on the calendar", 0)
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{said, other}, Watermark: 1})
	for _, word := range []string{"sunday", "may", "2023", "7", "afternoon"} {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: word, Mode: memory.ModeText, K: 10})
		want := 0
		if word == "sunday" {
			want = 1
		}
		if len(hits) != want || (want == 1 && hits[0].ID != "said") {
			t.Errorf("text %q: %v, want %d literal match(es)", word, ids(hits), want)
		}
	}
	hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "what happened in may 2023", Mode: memory.ModeText, K: 10})
	if len(hits) != 0 {
		t.Errorf("text mode matched dates: %v", ids(hits))
	}
	q := memory.SearchQuery{Tenant: "t", Text: "which comet review was in May 2023", Mode: memory.ModeHybrid, K: 10, Vector: topicVec(0)}
	if got := ids(mustSearch(t, x, q)); len(got) != 2 {
		t.Errorf("hybrid, asking when: %v, want both through the date field", got)
	}
}
