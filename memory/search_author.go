package memory

import (
	"strings"
	"unicode"
)

// A question that names one of a conversation's authors is mostly answered
// by what that author wrote: "What does Alma grow?" by Alma's "I grow
// tomatoes", not by the other speaker's "Alma, do you grow anything?". On
// LoCoMo dev, of the evidence turns of questions naming exactly one of the
// two speakers, 250 of 259 are that speaker's. The name clause of the text
// side (index.DefaultNameBoost) adds too little to say so: a name every
// other turn carries has a low idf, and on the vector side (EmbedText puts
// the name first) it is one word of many.
//
// So in a search's pool (see neighbourPool), when the query names some of
// the pool's authors and not all of them, a result by another author keeps
// otherAuthorWeight of its score, its neighbours' share included: the
// question's words in one speaker's turn still lift the named speaker's
// reply next to it at full weight (addNeighbourScores reads the scores
// before this).
//
// Measured on LoCoMo dev (ctxd-bench eval --no-context, recall R@5/10/20
// overall; without: 63.9/74.7/80.3): the weight applied to the pool's own
// scores, before neighbours, 0.8 65.1/76.7/80.9, 0.6 66.7/77.1/81.4, 0.4
// 65.9/76.1/81.5 (single-hop R@20 86.4 -> 85.5 at 0.6); after neighbours,
// 0.8 66.9/76.7/82.2, 0.6 67.3/76.4/82.7, 0.5 67.3/76.4/81.9, 0.4 67.5/
// 76.0/81.9. Of that plateau 0.6 is the value at which no category is
// lower at any k (at 0.5 one single-hop question falls out of the top 20:
// R@20 86.4 -> 85.5).
const otherAuthorWeight = 0.6

// weighAuthors multiplies by otherAuthorWeight the score of each result of
// res whose author the query does not name, when it names one of res's
// authors (see above), and records the weight on the result. A message
// without a name (a tool's output, an agent's turn) has no author to
// weigh: it keeps its score.
func weighAuthors(res []SearchResult, query string) {
	named := namedAuthors(res, query)
	for i := range res {
		res[i].AuthorWeight = 1
		if named != nil && res[i].Name != "" && !named[res[i].Name] {
			res[i].AuthorWeight = otherAuthorWeight
			res[i].Score *= otherAuthorWeight
		}
	}
}

// namedAuthors is the set of the authors of res (their messages' names)
// that query names, its words in a row as whole words ("Marisol's" names
// Marisol, "Marisols" does not); nil when it names none, or every one: then
// the name says nothing about who answers.
func namedAuthors(res []SearchResult, query string) map[string]bool {
	qw := lowerWords(query)
	var named map[string]bool
	seen := map[string]bool{}
	for _, x := range res {
		if x.Name == "" || seen[x.Name] {
			continue
		}
		seen[x.Name] = true
		if hasRun(qw, lowerWords(x.Name)) {
			if named == nil {
				named = map[string]bool{}
			}
			named[x.Name] = true
		}
	}
	if len(named) == len(seen) {
		return nil
	}
	return named
}

// lowerWords lowercases s and splits it into runs of letters and digits.
func lowerWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// hasRun reports whether run occurs in words as consecutive words.
func hasRun(words, run []string) bool {
	if len(run) == 0 {
		return false
	}
	for i := 0; i+len(run) <= len(words); i++ {
		match := true
		for j, w := range run {
			if words[i+j] != w {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
