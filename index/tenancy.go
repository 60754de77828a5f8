package index

import (
	"context"
	"fmt"

	"github.com/blevesearch/bleve/v2/search"
	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/ctxd/ctxd/memory"
)

// tenancy is what the index knows of its documents' tenants. While one
// tenant has ever written to it, Bleve's index-wide statistics are that
// tenant's, and its searches use them as they are; otherwise a search reads
// its tenant's (tenantStats). A value is never changed: Apply stores a new
// one.
type tenancy struct {
	sole  string // the only tenant seen; "" while there is none
	multi bool   // more than one tenant seen (once set, until the index is reopened)
}

// loadTenancy reads the tenants of an opened index from its tenant field's
// terms. A deleted tenant's term can linger until segments merge: that errs
// on the side of the tenant's own statistics.
func loadTenancy(r bindex.IndexReader) (*tenancy, error) {
	dict, err := r.FieldDict(fieldTenant)
	if err != nil {
		return nil, fmt.Errorf("read tenants: %w", err)
	}
	defer dict.Close()
	t := &tenancy{}
	for {
		e, err := dict.Next()
		if err != nil {
			return nil, fmt.Errorf("read tenants: %w", err)
		}
		if e == nil {
			return t, nil
		}
		if t.sole != "" {
			return &tenancy{multi: true}, nil
		}
		t.sole = e.Term
	}
}

func (x *Index) loadTenancy() error {
	adv, err := x.text.Advanced()
	if err != nil {
		return err
	}
	r, err := adv.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	t, err := loadTenancy(r)
	if err != nil {
		return err
	}
	x.tenants.Store(t)
	return nil
}

// noteTenants records the tenants of msgs. Apply calls it before the
// documents are committed, so that a search that saw no other tenant before
// and after its Bleve search cannot have counted another tenant's documents
// in the index-wide statistics it scored with.
func (x *Index) noteTenants(msgs []*memory.Message) {
	t := x.tenants.Load()
	if t.multi {
		return
	}
	next := *t
	for _, m := range msgs {
		switch {
		case next.sole == "":
			next.sole = m.Tenant
		case m.Tenant != next.sole:
			next = tenancy{multi: true}
		}
		if next.multi {
			break
		}
	}
	if next != *t {
		x.tenants.Store(&next)
	}
}

// soleTenant reports whether tenant is the only one the index has seen.
func (x *Index) soleTenant(tenant string) bool {
	t := x.tenants.Load()
	return !t.multi && t.sole == tenant
}

// tenantStats are the BM25 statistics of tenant's documents, for Bleve to
// score a search of them with instead of its index-wide ones (which count
// every tenant's documents): the tenant's document count and, per field,
// the cardinality Bleve divides by it for the average field length. The
// prose fields are the tenant's own (tenantField). The keyword and date
// fields are shared, but they are only unscored filters; Bleve wants a
// figure for every field a term searcher reads, so they get the index's.
//
// The figures come from the reader open now; the search may run on a newer
// one. Off by one batch in a race, they are still the tenant's alone.
//
// Bleve's cardinality of a field is the sum of each segment's distinct
// terms, so a merge of segments holding the tenant's documents changes it
// (and, past a whole number, its average field length), whichever tenant's
// writes caused the merge. Single-tenant indexes have the same drift from
// their own merges; the document frequencies and counts, which carried
// what another tenant wrote, are exact per tenant.
func (x *Index) tenantStats(tenant string) (*search.BM25Stats, error) {
	cache := x.dfs() // before the reader: see commonFilter
	adv, err := x.text.Advanced()
	if err != nil {
		return nil, fmt.Errorf("tenant statistics: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, fmt.Errorf("tenant statistics: %w", err)
	}
	defer r.Close()
	docs, err := tenantDocs(r, cache, tenant)
	if err != nil {
		return nil, err
	}
	br, ok := r.(bindex.BM25Reader)
	if !ok {
		return nil, fmt.Errorf("tenant statistics: the index reader (%T) keeps no field statistics", r)
	}
	card := make(map[string]int, 8)
	for _, f := range []string{fieldSession, fieldTenant, fieldState, fieldKind, fieldCreatedAt} {
		if card[f], err = br.FieldCardinality(f); err != nil {
			return nil, fmt.Errorf("tenant statistics: field %s: %w", f, err)
		}
	}
	for _, f := range []string{fieldText, fieldName, fieldWhen} {
		tf := tenantField(f, tenant)
		if card[tf], err = br.FieldCardinality(tf); err != nil {
			return nil, fmt.Errorf("tenant statistics: field %s: %w", tf, err)
		}
	}
	// An unscored disjunction of terms (two sessions, two states) is folded
	// into one term searcher on the pseudo-field "*", which Bleve's own
	// statistics know as a field without terms.
	card["*"] = 0
	return &search.BM25Stats{DocCount: float64(docs), FieldCardinality: card}, nil
}

// tenantDocs is how many documents tenant has in r (deleted ones not
// counted), cached for the write generation of cache.
func tenantDocs(r bindex.IndexReader, cache *dfCache, tenant string) (uint64, error) {
	if n, ok := cache.get(fieldTenant, []byte(tenant)); ok {
		return n, nil
	}
	tfr, err := r.TermFieldReader(context.Background(), []byte(tenant), fieldTenant, false, false, false)
	if err != nil {
		return 0, fmt.Errorf("count documents of tenant %q: %w", tenant, err)
	}
	defer tfr.Close()
	n := tfr.Count()
	cache.put(fieldTenant, []byte(tenant), n)
	return n, nil
}
