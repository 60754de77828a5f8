package memory

// Relevance of messages to a prompt, for compaction (what leaves the
// window) and for the window builder (what goes in): the scoring package's
// components over the session's messages, with the policy's weights.

import (
	"context"
	"fmt"
	"strings"

	"github.com/ctxd/ctxd/scoring"
)

// scoreUnits scores every unprotected unit against the prompt: a unit scores
// as its best message.
func (s *Service) scoreUnits(ctx context.Context, sess *Session, prompt string, window []*Message, units []*unit) (map[string]scoring.Score, error) {
	var qvec []float32
	if strings.TrimSpace(prompt) != "" {
		vecs, err := s.embed(ctx, []string{prompt})
		if err != nil {
			return nil, fmt.Errorf("embed prompt: %w", err)
		}
		qvec = vecs[0]
	}
	var cands []*Message
	for _, u := range units {
		if u.protected == "" {
			cands = append(cands, u.msgs...)
		}
	}
	scores, err := s.scoreMessages(ctx, sess, s.policy(sess).scoringParams(), prompt, qvec, cands, window)
	if err != nil {
		return nil, err
	}
	for _, u := range units {
		if u.protected == "" {
			u.score = unitScore(u, scores, 0)
		}
	}
	return scores, nil
}

func dot(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// recoveryParams rank cold messages for recovery: by similarity and
// importance only. Every cold message is old, so recency says little among
// them, and references counted against the window favoured turns that are
// talked about over turns that answer the prompt. LoCoMo dev, evidence in
// the context window overall (window 4,096, budget 2,048; two runs each):
// policy weights 85.6/85.4 (temporal 93.7), similarity and importance only
// 85.7/86.5 (temporal 96.8), 0.8 similarity with 0.2 references 83.5/84.7.
func (p Policy) recoveryParams() scoring.Params {
	sp := p.scoringParams()
	sp.Weights.Recency, sp.Weights.References = 0, 0
	if sp.Weights.Similarity+sp.Weights.Importance <= 0 {
		return p.scoringParams() // a policy that weighs neither: keep its own
	}
	return sp
}

// scoringParams is the scoring part of the policy.
func (p Policy) scoringParams() scoring.Params {
	sp := scoring.DefaultParams
	sp.Weights = scoring.Weights{Similarity: p.WeightSimilarity, Recency: p.WeightRecency,
		References: p.WeightReferences, Importance: p.WeightImportance}
	sp.HalfLifeTurns = p.RecencyHalfLifeTurns
	return sp
}

// unitScore is the score of a unit's best message. A unit states a time when
// any of its messages does (a recovered turn asks, the reply after it says
// when): the best message's score gets the bonus it would get for it.
func unitScore(u *unit, scores map[string]scoring.Score, whenBonus float64) float64 {
	best, bestWhen, anyWhen := 0.0, false, false
	for _, m := range u.msgs {
		sc := scores[m.ID]
		when := sc.Components.When > 0
		if sc.Total > best || (sc.Total == best && when) {
			best, bestWhen = sc.Total, when
		}
		anyWhen = anyWhen || when
	}
	if anyWhen && !bestWhen {
		best = min(best+whenBonus, 1)
	}
	return best
}

// scoreMessages scores cands against the prompt: full-text scores from the
// index, cosine from their vectors (cands must carry them), recency and
// references from their place among docs (in window order).
//
// The full-text search is restricted to the candidates by id, not by state:
// the index learns of recoveries a moment after the store (syncIndexSoon), and
// a state filter made a message recovered by the previous call invisible to
// this one's scoring. On LoCoMo the evidence a question had recovered earlier
// then lost its place in the window to turns that merely were recent.
func (s *Service) scoreMessages(ctx context.Context, sess *Session, sp scoring.Params, prompt string, qvec []float32, cands, docs []*Message) (map[string]scoring.Score, error) {
	out := map[string]scoring.Score{}
	if len(cands) == 0 {
		return out, nil
	}
	bm25 := map[string]float64{}
	if qvec != nil {
		ids := make([]string, len(cands))
		for i, m := range cands {
			ids[i] = m.ID
		}
		hits, err := s.Index.Search(ctx, SearchQuery{Tenant: sess.Tenant, Text: prompt, Sessions: []string{sess.ID},
			IDs: ids, K: min(len(cands), 1000), Mode: ModeText})
		if err != nil {
			return nil, fmt.Errorf("score by full text: %w", err)
		}
		for _, h := range hits {
			bm25[h.ID] = h.TextScore
		}
	}
	return s.scoreWith(sp, qvec, cands, docs, bm25)
}

// scoreWith scores cands given their full-text scores.
func (s *Service) scoreWith(sp scoring.Params, qvec []float32, cands, docs []*Message, bm25 map[string]float64) (map[string]scoring.Score, error) {
	out := map[string]scoring.Score{}
	if len(cands) == 0 {
		return out, nil
	}
	sdocs := make([]scoring.Doc, len(docs))
	pos := make(map[string]int, len(docs))
	for i, m := range docs {
		sdocs[i] = scoring.Doc{ID: m.ID, Text: m.Content, Turn: i}
		pos[m.ID] = i
	}
	sc := make([]scoring.Candidate, 0, len(cands))
	for _, m := range cands {
		sc = append(sc, scoring.Candidate{ID: m.ID, Text: m.Content, Turn: pos[m.ID], CreatedAt: m.CreatedAt,
			Important: m.Important, BM25: bm25[m.ID], Cosine: dot(qvec, m.Vector),
			StatesTime: sp.WhenBonus > 0 && scoring.StatesTime(m.Content)})
	}
	scored, err := scoring.ScoreAll(sp, sc, sdocs, len(docs)-1, s.Now())
	if err != nil {
		return nil, Errorf(EINVALID, "scoring weights: %v", err)
	}
	for _, r := range scored {
		out[r.ID] = r
	}
	return out, nil
}
