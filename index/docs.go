package index

import (
	"context"
	"fmt"
	"slices"

	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/ctxd/ctxd/memory"
)

var _ memory.DocLister = (*Index)(nil)

// ForEachDoc calls fn for every document of the text side, in id order,
// with the tenant, session and state it was indexed with, so verify can
// compare the index with the store. The keyword fields are not stored, so
// they are read from the term dictionaries: one posting list per value.
func (x *Index) ForEachDoc(ctx context.Context, fn func(memory.IndexDoc) error) error {
	if x.closed.Load() {
		return errClosed
	}
	adv, err := x.text.Advanced()
	if err != nil {
		return fmt.Errorf("list documents of index %s: %w", x.dir, err)
	}
	r, err := adv.Reader()
	if err != nil {
		return fmt.Errorf("list documents of index %s: %w", x.dir, err)
	}
	defer r.Close()
	docs, err := allDocs(r)
	if err != nil {
		return fmt.Errorf("list documents of index %s: %w", x.dir, err)
	}
	fields := map[string]func(*memory.IndexDoc, string){
		fieldTenant:  func(d *memory.IndexDoc, v string) { d.Tenant = v },
		fieldSession: func(d *memory.IndexDoc, v string) { d.SessionID = v },
		fieldState:   func(d *memory.IndexDoc, v string) { d.State = memory.State(v) },
	}
	for field, set := range fields {
		if err := eachTermDoc(ctx, r, field, func(term, id string) {
			if d := docs[id]; d != nil {
				set(d, term)
			}
		}); err != nil {
			return fmt.Errorf("list documents of index %s: field %s: %w", x.dir, field, err)
		}
	}
	ids := make([]string, 0, len(docs))
	for id := range docs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := fn(*docs[id]); err != nil {
			return err
		}
	}
	return nil
}

func allDocs(r bindex.IndexReader) (map[string]*memory.IndexDoc, error) {
	it, err := r.DocIDReaderAll()
	if err != nil {
		return nil, err
	}
	defer it.Close()
	docs := map[string]*memory.IndexDoc{}
	for {
		iid, err := it.Next()
		if err != nil {
			return nil, err
		}
		if iid == nil {
			return docs, nil
		}
		id, err := r.ExternalID(iid)
		if err != nil {
			return nil, err
		}
		docs[id] = &memory.IndexDoc{ID: id}
	}
}

// eachTermDoc calls fn for every (term, document id) of a keyword field.
func eachTermDoc(ctx context.Context, r bindex.IndexReader, field string, fn func(term, id string)) error {
	dict, err := r.FieldDict(field)
	if err != nil {
		return err
	}
	defer dict.Close()
	for {
		e, err := dict.Next()
		if err != nil {
			return err
		}
		if e == nil {
			return nil
		}
		tfr, err := r.TermFieldReader(ctx, []byte(e.Term), field, false, false, false)
		if err != nil {
			return err
		}
		var tfd bindex.TermFieldDoc
		for {
			d, err := tfr.Next(&tfd)
			if err != nil {
				tfr.Close()
				return err
			}
			if d == nil {
				break
			}
			id, err := r.ExternalID(d.ID)
			if err != nil {
				tfr.Close()
				return err
			}
			fn(e.Term, id)
		}
		if err := tfr.Close(); err != nil {
			return err
		}
	}
}
