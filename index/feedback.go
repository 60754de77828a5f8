package index

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/ctxd/ctxd/memory"
)

// Pseudo-relevance feedback: a search of a few sessions is run again with
// the most distinctive terms of its first best results (memory passes their
// texts as SearchQuery.Feedback), each in a clause of its own at a boost up
// to FeedbackWeight. A question that needs several facts ("what does Ines
// do on weekends?") finds one by its words, and the others share that one's
// rarer words (the place, the club, the thing) rather than the question's.
//
// A term counts by its share of each feedback text, the text's rank (the
// first weighs 1, the second 1/2, ...) and its idf among the tenant's
// documents; a term of the query, one in a single document (it can only
// bring back its own) and one in more than feedbackMaxShare of them (the
// speech of a conversation: "yeah", "photo", "week") are left out.
//
// Measured on LoCoMo dev (ctxd-bench eval --no-context, recall R@5/10/20;
// without: overall 67.96/77.95/83.30, single-hop 72.81/83.77/87.28, multi-
// hop 31.36/46.67/57.98, temporal 90.48/96.83/96.83, open-domain 31.82/
// 31.82/63.64), 5 texts, 8 terms: share 0.05 weight 0.3 69.42/78.20/83.51
// (single-hop R@20 85.96); share 0.02 weight 0.3 69.83/78.42/84.08; share
// 0.02 weight 0.2 69.42/78.71/84.08, single-hop 74.56/84.21/87.28, multi-
// hop 33.41/47.25/59.84, temporal 92.06/95.24/98.41 (one question falls
// from 9th to 11th), open-domain 27.27/50.00/63.64 (R@5: one of two
// evidence turns of one question falls from 4th to 7th); weight 0.15 or
// 0.5, 3 or 10 texts, 4 or 15 terms, equal weight for each text, share
// 0.01: each lower overall at one k or more. Of the 40 question-k pairs
// that changed, 26 rose. Keeping the first search's score where it was the
// better (max fusion) kept nothing of the gain: 67.96/77.95/83.52.
const (
	DefaultFeedbackWeight = 0.2
	feedbackMaxShare      = 0.02
	feedbackMaxTerms      = 8
	// feedbackTextBytes bounds what of each feedback text is analysed: a
	// tool's output of megabytes would cost more than the search.
	feedbackTextBytes = 4 << 10
)

// FeedbackTerm is one term of a search's feedback clause, with its boost.
type FeedbackTerm struct {
	Term  string
	Boost float64
}

// feedbackOf is q's feedback terms (feedbackTerms), or none in text mode,
// the literal match.
func (x *Index) feedbackOf(q *memory.SearchQuery) []FeedbackTerm {
	if q.Mode == memory.ModeText || x.opts.FeedbackWeight <= 0 || len(q.Feedback) == 0 {
		return nil
	}
	return x.feedbackTerms(q.Tenant, q.Feedback, q.Text)
}

// feedbackQuery is the disjunction of terms in tenant's message text, or
// nil when there are none.
func feedbackQuery(tenant string, terms []FeedbackTerm) query.Query {
	if len(terms) == 0 {
		return nil
	}
	qs := make([]query.Query, len(terms))
	for i, t := range terms {
		tq := bleve.NewTermQuery(t.Term)
		tq.SetField(tenantField(fieldText, tenant))
		tq.SetBoost(t.Boost)
		qs[i] = tq
	}
	return bleve.NewDisjunctionQuery(qs...)
}

// feedbackTerms are the best feedbackMaxTerms analysed terms of texts (best
// first) for tenant's search of queryText, weighed as the comment above
// says, the best at FeedbackWeight and the others in proportion.
func (x *Index) feedbackTerms(tenant string, texts []string, queryText string) []FeedbackTerm {
	an := x.text.Mapping().AnalyzerNamed(analyzerName)
	if len(texts) == 0 || an == nil {
		return nil
	}
	cache := x.dfs() // before the reader: see commonFilter
	adv, err := x.text.Advanced()
	if err != nil {
		return nil
	}
	r, err := adv.Reader()
	if err != nil {
		return nil
	}
	defer r.Close()
	docs, err := tenantDocs(r, cache, tenant)
	if err != nil || docs == 0 {
		return nil
	}
	f := &termFilter{r: r, field: tenantField(fieldText, tenant), cache: cache}
	idf := map[string]float64{} // 0: left out
	for _, tok := range an.Analyze([]byte(queryText)) {
		idf[string(tok.Term)] = 0
	}
	weight := map[string]float64{}
	for i, text := range texts {
		toks := an.Analyze([]byte(text[:min(len(text), feedbackTextBytes)]))
		for _, tok := range toks {
			term := string(tok.Term)
			v, ok := idf[term]
			if !ok {
				df, err := f.df(context.Background(), tok.Term)
				if err != nil {
					return nil
				}
				if df >= 2 && float64(df) <= feedbackMaxShare*float64(docs) {
					v = math.Log(float64(docs) / float64(df))
				}
				idf[term] = v
			}
			if v > 0 {
				weight[term] += v / float64(i+1) / float64(len(toks))
			}
		}
	}
	out := make([]FeedbackTerm, 0, len(weight))
	for t, w := range weight {
		out = append(out, FeedbackTerm{t, w})
	}
	slices.SortFunc(out, func(a, b FeedbackTerm) int {
		if c := cmp.Compare(b.Boost, a.Boost); c != 0 {
			return c
		}
		return cmp.Compare(a.Term, b.Term)
	})
	out = out[:min(feedbackMaxTerms, len(out))]
	if len(out) > 0 {
		top := out[0].Boost
		for i := range out {
			out[i].Boost *= x.opts.FeedbackWeight / top
		}
	}
	return out
}
