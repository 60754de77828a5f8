package index

import (
	"fmt"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/ctxd/ctxd/index/glove"
	"github.com/ctxd/ctxd/memory"
)

// Expander proposes words near a query word in meaning (the GloVe model's
// nearest neighbours), best first. It must be safe for concurrent use.
type Expander func(word string) []string

// Query expansion as ctxd serves it: a query word's nearest GloVe words,
// at cosine 0.6 or more (0.5 measured the same on LoCoMo, 0.7 below), in
// hybrid searches within a few sessions (memory asks for it there).
// DefaultExpansionWeight, measured on LoCoMo dev through the API (ctxd
// eval, recall R@5/10/20 overall): off 55.7/63.9/70.7, 0.3 55.2/63.9/72.0,
// 0.5 55.4/64.4/72.0 (open-domain R@20 36.4 -> 45.5; temporal R@5 85.7 ->
// 82.5, above its floor of 81.0). Evidence in the context window: off
// 86.4-86.7, 0.5 86.7-86.8. A word's first lookup scans the model (~1.3 ms
// with AVX2), later ones hit a cache.
const (
	ExpansionNeighbours    = 5
	ExpansionMinCos        = 0.6
	DefaultExpansionWeight = 0.5
)

// GloveExpander proposes a word's ExpansionNeighbours nearest words in the
// embedded GloVe model, at ExpansionMinCos or more. It serves whatever the
// embedder: it proposes words, not vectors.
func GloveExpander() (Expander, error) {
	model, err := glove.Default()
	if err != nil {
		return nil, fmt.Errorf("query expansion: %w", err)
	}
	return func(word string) []string {
		var out []string
		for _, nb := range model.Neighbours(word, ExpansionNeighbours, ExpansionMinCos) {
			out = append(out, nb.Word)
		}
		return out
	}, nil
}

// Query expansion limits: query terms looked up (each uncached lookup
// scans the model, ~1.3 ms), words added per term and in all. A query of
// many words is specific enough; its expansion would cost postings and add
// noise.
const (
	expandedTerms     = 6
	expansionsPerWord = 5
	maxExpansions     = 20
)

// expands reports whether q's text side also matches expansion words: when
// q asks for them, and not in text mode, which is the literal match.
func expands(q *memory.SearchQuery) bool { return q.Expand && q.Mode != memory.ModeText }

// expansionQuery is a clause matching words (expansionWords) in the message
// text of tenant at boost ExpansionWeight, or nil when there are none.
func (x *Index) expansionQuery(tenant string, words []string) query.Query {
	if len(words) == 0 {
		return nil
	}
	m := bleve.NewMatchQuery(strings.Join(words, " "))
	m.SetField(tenantField(fieldText, tenant))
	m.Analyzer = analyzerName
	m.SetBoost(x.opts.ExpansionWeight)
	return m
}

// expansionWords are the neighbours of text's words, when expansion is on.
// Words are looked up as written (lower-cased by the expander), but only
// those the analyzer keeps: stopwords have no useful neighbours. A neighbour
// that analyses to a term of the query itself, or of an earlier neighbour,
// adds nothing and is left out, and so is one common among tenant's documents.
func (x *Index) expansionWords(tenant, text string) []string {
	if x.opts.Expander == nil || x.opts.ExpansionWeight <= 0 {
		return nil
	}
	an := x.text.Mapping().AnalyzerNamed(queryAnalyzerName)
	if an == nil {
		return nil
	}
	toks := an.Analyze([]byte(text))
	seen := map[string]bool{}
	for _, tok := range toks {
		seen[string(tok.Term)] = true
	}
	common := x.commonFilter(tenant)
	defer common.close()
	var words []string
	looked := map[string]bool{}
	for _, tok := range toks {
		if len(words) == maxExpansions || len(looked) == expandedTerms {
			break
		}
		if looked[string(tok.Term)] {
			continue
		}
		looked[string(tok.Term)] = true
		added := 0
		for _, nb := range x.opts.Expander(text[tok.Start:tok.End]) {
			if len(words) == maxExpansions || added == expansionsPerWord {
				break
			}
			terms := an.Analyze([]byte(nb))
			if len(terms) != 1 || seen[string(terms[0].Term)] || common.is(terms[0].Term) {
				continue
			}
			seen[string(terms[0].Term)] = true
			words = append(words, nb)
			added++
		}
	}
	return words
}
