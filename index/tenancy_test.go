package index

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blevesearch/bleve/v2"

	"github.com/ctxd/ctxd/memory"
)

// A single-tenant index searches without the tenant filter, with the same
// scores up to a constant factor (Bleve's query norm counts the filter's
// weight), which min-max fusion cancels; once a second tenant writes, the filter is back, and a reopened
// index with two tenants starts with it.
func TestSoleTenantSkipsFilter(t *testing.T) {
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
	filtered := bleveScoresWith(t, x, &q, true)
	unfiltered := bleveScores(t, x, q)
	if len(unfiltered) != 3 || !proportional(filtered, unfiltered) {
		t.Fatalf("scores without the tenant filter %v, with %v", unfiltered, filtered)
	}

	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{msg("globex", "s1", "g", "rocket launch secrets", 0)}, Watermark: 2})
	if x.soleTenant("acme") {
		t.Fatal("still a sole tenant after globex wrote")
	}
	if got := bleveScores(t, x, q); len(got) != len(filtered) || got["g"] != 0 || !x.tenants.Load().multi {
		t.Fatalf("acme sees %v", got)
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
// first: the search sees them, and is redone with the filter.
func TestSecondTenantDuringUnfilteredSearch(t *testing.T) {
	x := openTest(t, Options{})
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{msg("acme", "s1", "a", "rocket launch", 0)}, Watermark: 1})
	hooked := false
	testHookTenancyRead = func() {
		if !hooked {
			hooked = true
			mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{msg("globex", "s1", "g", "rocket launch", 0)}, Watermark: 2})
		}
	}
	defer func() { testHookTenancyRead = nil }()
	hits := mustSearch(t, x, memory.SearchQuery{Tenant: "acme", Text: "rocket", Mode: memory.ModeText})
	if !hooked {
		t.Fatal("the hook did not run")
	}
	if got := ids(hits); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("acme's hits %v", got)
	}
}

func bleveScoresWith(t *testing.T, x *Index, q *memory.SearchQuery, byTenant bool) map[string]float64 {
	t.Helper()
	res, err := x.text.SearchInContext(context.Background(), bleve.NewSearchRequestOptions(x.scopedQuery(q, q.Text, nil, byTenant), 10, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, h := range res.Hits {
		out[h.ID] = h.Score
	}
	return out
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
