package index

import "strings"

// A query text longer than maxQueryBytes is searched for by its distinct
// words, the first maxQueryTerms of them. Bleve turns each analysed token
// of a match query into a term searcher of its own, repeats included: a
// compaction scoring a session against its latest user message (a 1 MB
// paste) built some 200,000 of them, which held hundreds of MB while two
// such writes ran. Repeats only raise a term's weight in a long query's
// scores; a prompt of ordinary length is searched as written.
const (
	maxQueryBytes = 16 << 10
	maxQueryTerms = 1024
)

// boundQuery is text reduced to its first maxQueryTerms distinct words
// when it is longer than maxQueryBytes, else text itself.
func (x *Index) boundQuery(text string) string {
	if len(text) <= maxQueryBytes {
		return text
	}
	an := x.text.Mapping().AnalyzerNamed(queryAnalyzerName)
	if an == nil {
		return text
	}
	seen := map[string]bool{}
	var words []string
	var within span
	for _, tok := range an.Analyze([]byte(text)) {
		if within.holds(tok.Start, tok.End) || seen[string(tok.Term)] {
			continue
		}
		within = span{tok.Start, tok.End}
		seen[string(tok.Term)] = true
		words = append(words, text[tok.Start:tok.End])
		if len(words) == maxQueryTerms {
			break
		}
	}
	return strings.Join(words, " ")
}
