package memory

import (
	"context"
	"fmt"
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

// withFeedback searches q again with the feedback of its pool res (see
// feedbackOf) and returns the new pool and q as searched; with none, res
// and q.
func (s *Service) withFeedback(ctx context.Context, tenant string, q SearchQuery, res []SearchResult) ([]SearchResult, SearchQuery, error) {
	texts := feedbackOf(rankPool(slices.Clone(res), q.Text, feedbackTexts))
	if len(texts) == 0 {
		return res, q, nil
	}
	q.Feedback = texts
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

// feedbackOf is the texts of the best results best that are not tools'
// outputs, or none when they are not most of them (see feedbackTexts).
func feedbackOf(best []SearchResult) []string {
	var texts []string
	for _, x := range best {
		if x.Content != "" && x.Role != RoleTool {
			texts = append(texts, x.Content)
		}
	}
	if 2*len(texts) <= len(best) {
		return nil
	}
	return texts
}
