package index

import (
	"cmp"
	"context"
	"slices"
	"strings"

	bindex "github.com/blevesearch/bleve_index_api"
)

// Query terms found in more than commonTermShare of the documents are left
// out of the full-text clause when rarer terms remain. BM25 gives them
// little weight, but scoring their postings is most of a query's cost:
// across 100k messages a hybrid query spent 80% of its CPU walking the
// postings of a few common words, and a context call on a session of 10k
// cold messages half of its CPU. What pruning costs in recall, measured on
// LoCoMo dev with pruning forced on (TestLoCoMoHybrid, hybrid R@10 overall;
// 63.9 unpruned): share 0.05 57.4 (temporal 90.5 -> 81.0), 0.1 62.5, 0.2 and
// above 63.9. Context10kCold at 0.2: p50 22 -> 9-11 ms (with the vector scan
// change). Small indexes are searched exactly: they are cheap anyway.
const (
	commonTermShare = 0.2
	commonOnlyKeep  = 2
)

// commonTermMinDocs is the index size from which common terms are pruned; a
// variable so tests can prune on a small index.
var commonTermMinDocs uint64 = 5_000

// withoutCommonTerms returns text keeping only the words whose analysed
// terms are not common among tenant's documents, or text itself when
// pruning does not apply.
func (x *Index) withoutCommonTerms(ctx context.Context, tenant, text string) string {
	an := x.text.Mapping().AnalyzerNamed(queryAnalyzerName)
	common := x.commonFilter(tenant)
	defer common.close()
	if an == nil || common.r == nil {
		return text
	}
	type word struct {
		text, term string
		df         uint64
	}
	var words []word
	var kept []string
	var within span
	for _, tok := range an.Analyze([]byte(text)) {
		if within.holds(tok.Start, tok.End) {
			continue // a word of the code name before it, which brings it back
		}
		within = span{tok.Start, tok.End}
		df, err := common.df(ctx, tok.Term)
		if err != nil {
			return text
		}
		w := word{text[tok.Start:tok.End], string(tok.Term), df}
		words = append(words, w)
		if w.df <= common.limit {
			kept = append(kept, w.text)
		}
	}
	if len(kept) == len(words) {
		return text
	}
	if len(kept) == 0 {
		// Only common words: the rarest few still rank, at a fraction of
		// the cost of all of them.
		// A word that is there twice among them ("nouploum the nouploum")
		// is searched once: twice scored the same postings for the same
		// ranking (each clause's scores only doubled).
		slices.SortStableFunc(words, func(a, b word) int { return cmp.Compare(a.df, b.df) })
		var terms []string
		for _, w := range words[:min(commonOnlyKeep, len(words))] {
			if !slices.Contains(terms, w.term) {
				terms = append(terms, w.term)
				kept = append(kept, w.text)
			}
		}
	}
	return strings.Join(kept, " ")
}

// termFilter tells common terms of one tenant apart when the tenant has
// many documents; with few (or when the index cannot be read) it calls
// nothing common. Both the size and the shares are the tenant's: which of
// a tenant's words are pruned must not depend on what others wrote.
type termFilter struct {
	r     bindex.IndexReader
	field string // the tenant's text field
	limit uint64
	cache *dfCache
}

// commonFilter opens a termFilter for tenant; close it when done.
func (x *Index) commonFilter(tenant string) *termFilter {
	// The generation first: the reader is then at least as new as the
	// cache it fills.
	cache := x.dfs()
	adv, err := x.text.Advanced()
	if err != nil {
		return &termFilter{}
	}
	r, err := adv.Reader()
	if err != nil {
		return &termFilter{}
	}
	var docs uint64
	if x.soleTenant(tenant) {
		docs, err = r.DocCount()
	} else {
		docs, err = tenantDocs(r, cache, tenant)
	}
	if err != nil || docs < commonTermMinDocs {
		_ = r.Close()
		return &termFilter{}
	}
	return &termFilter{r: r, field: tenantField(fieldText, tenant), limit: uint64(float64(docs) * commonTermShare), cache: cache}
}

// is reports whether term is in more than commonTermShare of the documents.
func (f *termFilter) is(term []byte) bool {
	if f.r == nil {
		return false
	}
	df, err := f.df(context.Background(), term)
	return err == nil && df > f.limit
}

// df is how many documents have term in their text; f must be open.
func (f *termFilter) df(ctx context.Context, term []byte) (uint64, error) {
	if df, ok := f.cache.get(f.field, term); ok {
		return df, nil
	}
	tfr, err := f.r.TermFieldReader(ctx, term, f.field, false, false, false)
	if err != nil {
		return 0, err
	}
	defer tfr.Close()
	df := tfr.Count()
	f.cache.put(f.field, term, df)
	return df, nil
}

func (f *termFilter) close() {
	if f.r != nil {
		_ = f.r.Close()
	}
}
