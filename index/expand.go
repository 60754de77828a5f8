package index

import (
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Expander proposes words near a query word in meaning (the GloVe model's
// nearest neighbours), best first. It must be safe for concurrent use.
type Expander func(word string) []string

// Query expansion limits: words added per query word and in all. A query of
// many words is specific enough; its expansion would cost postings and add
// noise.
const (
	expansionsPerWord = 5
	maxExpansions     = 20
)

// expansionQuery is a clause matching the neighbours of text's words in the
// message text, at boost ExpansionWeight, or nil when there are none. Words
// are looked up as written (lower-cased by the expander), but only those
// the analyzer keeps: stopwords have no useful neighbours. A neighbour that
// analyses to a term of the query itself adds nothing and is left out.
func (x *Index) expansionQuery(text string) query.Query {
	if x.opts.Expander == nil || x.opts.ExpansionWeight <= 0 {
		return nil
	}
	an := x.text.Mapping().AnalyzerNamed(analyzerName)
	if an == nil {
		return nil
	}
	var own []string
	for _, tok := range an.Analyze([]byte(text)) {
		own = append(own, string(tok.Term))
	}
	var words []string
	seen := map[string]bool{}
	for _, tok := range an.Analyze([]byte(text)) {
		word := text[tok.Start:tok.End]
		added := 0
		for _, nb := range x.opts.Expander(word) {
			if len(words) == maxExpansions || added == expansionsPerWord {
				break
			}
			terms := an.Analyze([]byte(nb))
			if len(terms) != 1 || seen[string(terms[0].Term)] || slices.Contains(own, string(terms[0].Term)) {
				continue
			}
			seen[string(terms[0].Term)] = true
			words = append(words, nb)
			added++
		}
	}
	if len(words) == 0 {
		return nil
	}
	m := bleve.NewMatchQuery(strings.Join(words, " "))
	m.SetField(fieldText)
	m.Analyzer = analyzerName
	m.SetBoost(x.opts.ExpansionWeight)
	return m
}
