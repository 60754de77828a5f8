package index

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// A single-tenant index scores with Bleve's index-wide statistics, which are
// then the tenant's own: the same scores as with the tenant's statistics.
// Once a second tenant writes, the tenant's are used; a reopened index with
// two tenants starts with them.
func TestSoleTenantUsesIndexStatistics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	x, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if x.soleTenant("acme") {
		t.Fatal("an empty index claims a sole tenant")
	}
	var msgs []*memory.Message
	for i, text := range []string{"rocket launch plan", "the rocket failed", "lunch plans", "launch window opens"} {
		msgs = append(msgs, msg("acme", "s1", string(rune('a'+i)), text, i))
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
	if !x.soleTenant("acme") || x.soleTenant("globex") {
		t.Fatalf("tenancy after acme's batch: %+v", *x.tenants.Load())
	}
	q := memory.SearchQuery{Tenant: "acme", Text: "rocket launch"}
	own := scoresWith(t, x, &q, false)
	indexWide := scoresWith(t, x, &q, true)
	if len(own) != 3 || !sameScores(own, indexWide) {
		t.Fatalf("scores with index-wide statistics %v, with the tenant's %v", indexWide, own)
	}

	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{msg("globex", "s1", "g", "rocket launch secrets", 0)}, Watermark: 2})
	if x.soleTenant("acme") {
		t.Fatal("still a sole tenant after globex wrote")
	}
	if got := bleveScores(t, x, q); !sameScores(got, own) || !x.tenants.Load().multi {
		t.Fatalf("acme's scores after globex wrote %v, before %v", got, own)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.soleTenant("acme") || x.soleTenant("globex") {
		t.Fatalf("reopened two-tenant index: %+v", *x.tenants.Load())
	}
	if got := bleveScores(t, x, q); !sameScores(got, own) {
		t.Fatalf("acme's scores after a reopen %v, before %v", got, own)
	}
}

// One tenant's writes do not move another's scores (issue 14): tenant B
// writing a rare word 20 times took tenant A's own note with that word from
// first to last in A's search, as B's documents counted in the word's
// document frequency, the document count and the average field length.
// A's scores in an index shared with B must be those of an index of A's
// documents alone, through B's writes, deletes and a reopen; so must the
// words a search of A prunes as common.
func TestTenantScoresIgnoreOtherTenants(t *testing.T) {
	old := commonTermMinDocs
	commonTermMinDocs = 20
	t.Cleanup(func() { commonTermMinDocs = old })

	acme := []*memory.Message{msg("acme", "s1", "note", "remember the zyzzyva password rotation", 0)}
	for i := range 30 {
		text := fmt.Sprintf("deploy log %d: the deploy of service %d went fine, deploy again tomorrow", i, i)
		if i%3 == 0 {
			text += " weather"
		}
		acme = append(acme, msg("acme", "s1", fmt.Sprintf("a%02d", i), text, i))
	}
	alone := openTest(t, Options{})
	mustApply(t, alone, memory.IndexBatch{Upserts: acme, Watermark: 1})
	dir := filepath.Join(t.TempDir(), "shared")
	shared, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { shared.Close() }()
	mustApply(t, shared, memory.IndexBatch{Upserts: acme, Watermark: 1})

	q := memory.SearchQuery{Tenant: "acme", Text: "zyzzyva deploy", Mode: memory.ModeText, K: 40}
	want := allScores(t, alone, q)
	if hits := mustSearch(t, alone, q); len(hits) == 0 || hits[0].ID != "note" {
		t.Fatalf("acme's note is not first on its own: %v", ids(hits))
	}
	const pruneQuery = "weather deploy zyzzyva"
	wantPruned := alone.withoutCommonTerms(context.Background(), "acme", pruneQuery)

	var globex []*memory.Message
	for i := range 20 {
		globex = append(globex, msg("globex", "g1", fmt.Sprintf("g%02d", i), "zyzzyva zyzzyva probe", i))
	}
	for i := range 200 {
		globex = append(globex, msg("globex", "g2", fmt.Sprintf("h%03d", i), "weather chatter that fills the index and lengthens it", i))
	}
	check := func(when string) {
		t.Helper()
		if got := allScores(t, shared, q); !sameScores(got, want) {
			t.Fatalf("%s: acme's scores %v, on its own %v", when, got, want)
		}
		hits := mustSearch(t, shared, q)
		if len(hits) == 0 || hits[0].ID != "note" {
			t.Fatalf("%s: acme's note is not first: %v", when, ids(hits))
		}
		for _, h := range hits {
			if !strings.HasPrefix(h.ID, "a") && h.ID != "note" {
				t.Fatalf("%s: acme's search found %s", when, h.ID)
			}
		}
		// Filters (a disjunction of sessions, of states, a time range)
		// read their fields' statistics too.
		fq := q
		fq.Sessions, fq.States, fq.Since = []string{"s1", "g1"}, []memory.State{memory.StateActive, memory.StateDropped}, t0.Add(-time.Hour)
		if hits := mustSearch(t, shared, fq); len(hits) == 0 || hits[0].ID != "note" {
			t.Fatalf("%s: acme's filtered search: %v", when, ids(hits))
		}
		if got := shared.withoutCommonTerms(context.Background(), "acme", pruneQuery); got != wantPruned {
			t.Fatalf("%s: acme's query pruned to %q, on its own %q", when, got, wantPruned)
		}
	}
	mustApply(t, shared, memory.IndexBatch{Upserts: globex, Watermark: 2})
	check("after globex wrote")
	mustApply(t, shared, memory.IndexBatch{Deletes: globex[:5], Watermark: 3})
	check("after globex deleted some")
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	if shared, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	check("after a reopen")
}

// A reopened single-tenant index knows its tenant.
func TestSoleTenantAfterReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	x, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{msg("acme", "s1", "a", "rocket", 0)}, Watermark: 1})
	_ = x.Close()
	if x, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if !x.soleTenant("acme") {
		t.Fatalf("tenancy = %+v", *x.tenants.Load())
	}
}

// A second tenant's first documents committed between a search's reading of
// the tenancy and its Bleve search must not leak into a search of the
// first, neither as hits nor through the index-wide statistics the search
// scored with: it sees them, and is redone with its tenant's.
func TestSecondTenantDuringSoleTenantSearch(t *testing.T) {
	x := openTest(t, Options{})
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{msg("acme", "s1", "a", "rocket launch", 0),
		msg("acme", "s1", "b", "rocket fuel for the launch pad", 1), msg("acme", "s1", "c", "lunch", 2)}, Watermark: 1})
	q := memory.SearchQuery{Tenant: "acme", Text: "rocket launch", Mode: memory.ModeText}
	want := allScores(t, x, q)
	hooked := false
	testHookTenancyRead = func() {
		if !hooked {
			hooked = true
			var globex []*memory.Message
			for i := range 5 {
				globex = append(globex, msg("globex", "s1", fmt.Sprintf("g%d", i), "rocket rocket launch launch", i))
			}
			mustApply(t, x, memory.IndexBatch{Upserts: globex, Watermark: 2})
		}
	}
	defer func() { testHookTenancyRead = nil }()
	got := allScores(t, x, q)
	if !hooked {
		t.Fatal("the hook did not run")
	}
	if !sameScores(got, want) {
		t.Fatalf("acme's scores %v, before globex wrote %v", got, want)
	}
	if hits := mustSearch(t, x, q); !slices.Equal(ids(hits), []string{"a", "b"}) {
		t.Fatalf("acme's hits %v", ids(hits))
	}
}

// scoresWith is searchScoped's raw Bleve scores for q's text.
func scoresWith(t *testing.T, x *Index, q *memory.SearchQuery, indexWide bool) map[string]float64 {
	t.Helper()
	res, err := x.searchScoped(context.Background(), q, q.Text, extraTerms{}, 40, indexWide)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, h := range res.Hits {
		out[h.ID] = h.Score
	}
	return out
}

// allScores is searchText's raw Bleve score of every document q matches
// (up to 100).
func allScores(t *testing.T, x *Index, q memory.SearchQuery) map[string]float64 {
	t.Helper()
	return textScores(t, x, q, 100)
}

// textScores is searchText's raw Bleve scores of q's best n documents.
func textScores(t *testing.T, x *Index, q memory.SearchQuery, n int) map[string]float64 {
	t.Helper()
	cs, err := x.searchText(context.Background(), &q, q.Text, extraTerms{}, n)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, c := range cs {
		out[c.id] = c.score
	}
	return out
}

// sameScores reports whether a and b score the same documents the same, to
// rounding.
func sameScores(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || math.Abs(v-w) > 1e-9*math.Max(1, math.Abs(v)) {
			return false
		}
	}
	return true
}

// proportional reports whether b holds a's keys with a's values times one
// factor.
func proportional(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	f := 0.0
	for k, v := range a {
		w, ok := b[k]
		if !ok || v == 0 {
			return false
		}
		if f == 0 {
			f = w / v
		}
		if math.Abs(w/v-f) > 1e-9 {
			return false
		}
	}
	return true
}
