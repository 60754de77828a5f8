package memory

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// feedbackTexts is how many of a first ranking's best results a search of
// a few sessions hands the index as pseudo-relevance feedback
// (SearchQuery.Feedback): the index searches again with their most
// distinctive words, at a lower weight than the query's own (the index's
// DefaultFeedbackWeight says what it measured). The first ranking is the
// pool's as rankPool makes it: a turn lifted by its neighbours or its
// author gives its words as well.
//
// Only what people and agents wrote teaches: a tool's output (a listing,
// a log, a test run) is full of names that have nothing to do with the
// question, and a question about one is after one line of it. When most
// of the best results are tool outputs there is no feedback at all: in
// TestSearchAgentSessionPlantedFacts (300 tool turns, 20 questions about
// one line each), feedback from every result found 15 of 20, from the
// others 16, and none 17, as before.
const feedbackTexts = 5

// The second search's vector moves towards the feedback results' stored
// vectors (Rocchio's relevance feedback): the query's vector plus
// feedbackVectorWeight times the mean of theirs, normalised. Measured on
// LoCoMo dev with the text side's feedback (ctxd-bench eval --no-context,
// recall R@5/10/20; text feedback alone: overall 69.42/78.71/84.08, single-
// hop 74.56/84.21/87.28, multi-hop 33.41/47.25/59.84, temporal 92.06/95.24/
// 98.41, open-domain 27.27/50.00/63.64; no feedback at all: 67.96/77.95/
// 83.30, 72.81/83.77/87.28, 31.36/46.67/57.98, 90.48/96.83/96.83, 31.82/
// 31.82/63.64), with the texts embedded again: 0.3 68.86/79.68/83.65; 0.7
// 69.44/80.55/84.93 (single-hop R@5 71.93); 1 69.87/79.68/85.36; 1.5
// 69.51/79.11/83.85. At 1 with the stored vectors (no embedding call):
// 69.65/79.68/85.14, single-hop 72.81/84.65/88.16, multi-hop 35.81/48.99/
// 63.22, temporal 93.65/96.83/96.83, open-domain 31.82/50.00/72.73: every
// category at or above no feedback at every k.
const feedbackVectorWeight = 1.0

// withFeedback searches q again with the feedback of its pool res (see
// feedbackOf) and returns the new pool and q as searched; with none, res
// and q.
func (s *Service) withFeedback(ctx context.Context, tenant string, q SearchQuery, res []SearchResult) ([]SearchResult, SearchQuery, error) {
	best := feedbackOf(rankPool(slices.Clone(res), q.Text, feedbackTexts))
	if len(best) == 0 {
		return res, q, nil
	}
	q.Feedback = make([]string, len(best))
	for i, x := range best {
		q.Feedback[i] = x.Content
	}
	if q.Vector != nil {
		var err error
		if q.Vector, err = s.feedbackVector(ctx, tenant, q.Vector, best); err != nil {
			return nil, q, err
		}
	}
	hits, err := s.Index.Search(ctx, q)
	if err != nil {
		return nil, q, fmt.Errorf("search index: %w", err)
	}
	known := make(map[string]*Message, len(res))
	for _, x := range res {
		known[x.ID] = x.Message
	}
	res, err = s.resolveKnown(ctx, tenant, hits, known)
	return res, q, err
}

// feedbackOf is the best results best that are not tools' outputs, or
// none when they are not most of them (see feedbackTexts).
func feedbackOf(best []SearchResult) []SearchResult {
	var out []SearchResult
	for _, x := range best {
		if x.Content != "" && x.Role != RoleTool {
			out = append(out, x)
		}
	}
	if 2*len(out) <= len(best) {
		return nil
	}
	return out
}

// feedbackVector is vec moved towards the stored vectors of best (see
// feedbackVectorWeight); a message without one (of another model, or not
// embedded yet) is left out, and with none vec is returned as it is.
func (s *Service) feedbackVector(ctx context.Context, tenant string, vec []float32, best []SearchResult) ([]float32, error) {
	ids := make([]string, len(best))
	for i, x := range best {
		ids[i] = x.ID
	}
	msgs, err := s.Store.MessagesByID(ctx, tenant, ids, true)
	if err != nil {
		return nil, err
	}
	var vecs [][]float32
	for _, m := range msgs {
		if len(m.Vector) == len(vec) {
			vecs = append(vecs, m.Vector)
		}
	}
	if len(vecs) == 0 {
		return vec, nil
	}
	return rocchio(vec, vecs, feedbackVectorWeight), nil
}

// rocchio is vec plus w times the mean of vecs, normalised to length 1.
func rocchio(vec []float32, vecs [][]float32, w float64) []float32 {
	out := make([]float64, len(vec))
	for i, x := range vec {
		out[i] = float64(x)
	}
	for _, v := range vecs {
		for i, x := range v {
			out[i] += w * float64(x) / float64(len(vecs))
		}
	}
	var n float64
	for _, x := range out {
		n += x * x
	}
	n = math.Sqrt(n)
	res := make([]float32, len(out))
	for i, x := range out {
		if n > 0 {
			res[i] = float32(x / n)
		}
	}
	return res
}
