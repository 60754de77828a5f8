package index

import (
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/search"
)

// analyzedTerms are the terms the text clause searches for: the query's
// words through the field's analyzer (lower case, no stop words, stems).
func (x *Index) analyzedTerms(query string) map[string]bool {
	terms := map[string]bool{}
	an := x.text.Mapping().AnalyzerNamed(analyzerName)
	if an == nil {
		return terms
	}
	for _, tok := range an.Analyze([]byte(query)) {
		terms[string(tok.Term)] = true
	}
	return terms
}

// snippet is the best fragment of text (a message's indexed text) with the
// words whose analysed terms are in terms marked. The search does not load
// term locations (searchText), so they are found here by analysing the
// text again, as indexing did: the same tokens, positions and offsets
// Bleve would have returned, for only the hits shown.
func (x *Index) snippet(text string, terms map[string]bool) string {
	s, _ := x.snippetOf(text, terms)
	return s
}

// snippetOf is snippet that also says which of terms text has.
func (x *Index) snippetOf(text string, terms map[string]bool) (string, search.TermLocationMap) {
	tlm := search.TermLocationMap{}
	if an := x.text.Mapping().AnalyzerNamed(analyzerName); an != nil && len(terms) > 0 {
		for _, tok := range an.Analyze([]byte(text)) {
			if term := string(tok.Term); terms[term] {
				tlm[term] = append(tlm[term], &search.Location{Pos: uint64(tok.Position), Start: uint64(tok.Start), End: uint64(tok.End)})
			}
		}
	}
	dm := &search.DocumentMatch{Locations: search.FieldTermLocationMap{fieldText: tlm}}
	doc := document.NewDocument("").AddField(document.NewTextField(fieldText, nil, []byte(text)))
	return cleanSnippet(x.hl.BestFragmentInField(dm, doc, fieldText)), tlm
}
