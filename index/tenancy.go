package index

import (
	"fmt"

	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/ctxd/ctxd/memory"
)

// tenancy is what the index knows of its documents' tenants. While one
// tenant has ever written to it, a search of that tenant needs no tenant
// filter: the filter is a conjunction that advances through the tenant's
// postings for every text match, and at 100k documents it doubled the cost
// of a text search of common words (BenchmarkSearch). A value is never
// changed: Apply stores a new one.
type tenancy struct {
	sole  string // the only tenant seen; "" while there is none
	multi bool   // more than one tenant seen (once set, until the index is reopened)
}

// loadTenancy reads the tenants of an opened index from its tenant field's
// terms. A deleted tenant's term can linger until segments merge: that errs
// on the side of filtering.
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
// and after its Bleve search cannot have seen another tenant's documents.
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
