package memory

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// SearchRequest is a search as a caller asks it.
type SearchRequest struct {
	Query    string
	Sessions []string // empty: every session of the caller's tenant
	K        int
	Mode     string
	States   []State
	Since    time.Time
	Until    time.Time
	// Neighbors brings the turn after each of the first Neighbors results
	// along, right after it: in a conversation the reply to a matched turn
	// often holds the answer (LoCoMo dev: R@10 +6.5 in RETRIEVAL.md).
	Neighbors int
}

// SearchResult is one found message with its score and snippet.
type SearchResult struct {
	*Message
	Score     float64
	Highlight string
	// TextScore and VectorScore are the normalised components of Score.
	TextScore, VectorScore float64
	// Via is "next_turn" for a result brought along by Neighbors.
	Via string
	// NeighborScore is what the result's neighbouring turns added to Score
	// (see neighbourWeight), WhenScore what stating a time added for a
	// question that asks when (see whenBonus), and AuthorWeight what Score
	// was then multiplied by (see otherAuthorWeight; 1 when nothing was):
	// Score is (the index's fused score + NeighborScore + WhenScore) *
	// AuthorWeight.
	NeighborScore float64
	WhenScore     float64
	AuthorWeight  float64
	// Feedback are the terms (stemmed) of the search's pseudo-relevance
	// feedback that the result has (see withFeedback): they are part of
	// its TextScore.
	Feedback []string
}

// Search limits.
const (
	DefaultK       = 10
	MaxK           = 100
	MaxQueryBytes  = 16 << 10
	MaxSearchScope = 1000 // sessions named in one search
	MaxNeighbors   = 10
)

// Validate checks a search request and fills defaults.
func (r *SearchRequest) Validate() error {
	if strings.TrimSpace(r.Query) == "" {
		return Errorf(EINVALID, "query: must not be empty")
	}
	if len(r.Query) > MaxQueryBytes {
		return Errorf(EINVALID, "query: %d bytes is over the limit of %d", len(r.Query), MaxQueryBytes)
	}
	if err := checkText(r.Query); err != nil {
		return Errorf(EINVALID, "query: %v", err)
	}
	switch {
	case r.K == 0:
		r.K = DefaultK
	case r.K < 0 || r.K > MaxK:
		return Errorf(EINVALID, "k: %d is outside 1..%d", r.K, MaxK)
	}
	switch r.Mode {
	case "":
		r.Mode = ModeHybrid
	case ModeHybrid, ModeText, ModeVector:
	default:
		return Errorf(EINVALID, "mode: %q is not one of hybrid, text, vector", r.Mode)
	}
	if len(r.Sessions) > MaxSearchScope {
		return Errorf(EINVALID, "sessions: %d is over the limit of %d", len(r.Sessions), MaxSearchScope)
	}
	for _, id := range r.Sessions {
		if err := ValidateSessionID(id); err != nil {
			return err
		}
	}
	if r.Neighbors < 0 || r.Neighbors > MaxNeighbors {
		return Errorf(EINVALID, "neighbors: %d is outside 0..%d", r.Neighbors, MaxNeighbors)
	}
	if !r.Since.IsZero() && !r.Until.IsZero() && r.Until.Before(r.Since) {
		return Errorf(EINVALID, "until: before since")
	}
	return nil
}

// scopedSearchCandidates is how many documents each side of a search within
// given sessions ranks before fusion: about all of a typical session, so
// that each side's scores are scaled over the session rather than over its
// own best few. LoCoMo dev (sessions of ~400 turns), hybrid recall
// R@5/10/20 overall: 50 candidates (the index's default for k 10) 55.4/
// 64.4/72.0, 200 55.6/65.2/74.2, 500 57.2/67.9/75.2 (1,000 the same); open-
// domain R@10 27.3 -> 36.4. A session's candidates are cheap; across all
// sessions at 100k documents 500 cost 1.7x the CPU of a query (4.1 -> 7.0
// ms), so searches across sessions keep the index's default. Context
// building gains nothing from it (evidence in window 86.7 either way).
//
// Query expansion (see index.Options.Expander) is asked for the same
// searches: it was measured on them (recall R@20 overall 70.7 -> 72.0,
// open-domain R@20 36.4 -> 45.5), while across 100 sessions at 100k it
// raised the one-client p99 from 21 to 31 ms (a word's first lookup scans
// the model) and context building gained nothing from it.
const (
	scopedSearchCandidates = 500
	scopedSearchSessions   = 4 // more sessions are searched like all of them
)

// Search finds the caller's messages that best match a query.
func (s *Service) Search(ctx context.Context, r SearchRequest) ([]SearchResult, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := s.catchUp(ctx, r.Sessions); err != nil {
		return nil, err
	}
	tenant := TenantFromContext(ctx)
	q := SearchQuery{Tenant: tenant, Text: r.Query, Sessions: r.Sessions, States: r.States,
		Since: r.Since, Until: r.Until, K: r.K, Mode: r.Mode, Highlight: true}
	if len(r.Sessions) > 0 && len(r.Sessions) <= scopedSearchSessions {
		q.Candidates, q.Expand = scopedSearchCandidates, true
	}
	if r.Mode != ModeText {
		vec, err := s.queryVector(ctx, r.Query)
		if err != nil {
			return nil, fmt.Errorf("embed query: %w", err)
		}
		if vec == nil && r.Mode == ModeVector {
			return []SearchResult{}, nil // no word the model knows: nothing is near it
		}
		q.Vector = vec
	}
	// Hybrid only: text mode stays the literal match.
	neighbours := q.Candidates > 0 && r.Mode == ModeHybrid
	if neighbours {
		// The pool without snippets: cutting one from each of 100 texts
		// (tool outputs of kilobytes) made a search of one session 7 times
		// slower; the final k get theirs below.
		q.K, q.Highlight = max(neighbourPool, 5*r.K), false // see neighbourWeight
	}
	hits, err := s.Index.Search(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("search index: %w", err)
	}
	res, err := s.resolve(ctx, tenant, hits)
	if err == nil && neighbours && !s.NoFeedback {
		res, q, err = s.withFeedback(ctx, tenant, q, res)
	}
	if err == nil && neighbours {
		res = rankPool(res, r.Query, r.K)
		err = s.highlight(ctx, q, res)
	}
	if err != nil || r.Neighbors == 0 {
		return res, err
	}
	return s.withNextTurns(ctx, tenant, res, r)
}

// highlight gives res their snippets: the index searches q again among
// their ids alone, with snippets.
func (s *Service) highlight(ctx context.Context, q SearchQuery, res []SearchResult) error {
	if len(res) == 0 {
		return nil
	}
	q.IDs = make([]string, len(res))
	for i, x := range res {
		q.IDs[i] = x.ID
	}
	q.K, q.Candidates, q.Highlight = len(res), len(res), true
	hits, err := s.Index.Search(ctx, q)
	if err != nil {
		return fmt.Errorf("search index: %w", err)
	}
	byID := make(map[string]Hit, len(hits))
	for _, h := range hits {
		byID[h.ID] = h
	}
	for i := range res {
		res[i].Highlight, res[i].Feedback = byID[res[i].ID].Highlight, byID[res[i].ID].Feedback
	}
	return nil
}

// withNextTurns inserts, after each of the first r.Neighbors results, the
// session's next message when it is not a result already and passes the
// filters; the list is then cut back to k.
func (s *Service) withNextTurns(ctx context.Context, tenant string, res []SearchResult, r SearchRequest) ([]SearchResult, error) {
	have := map[string]bool{}
	for _, x := range res {
		have[x.ID] = true
	}
	states := map[State]bool{}
	for _, st := range r.States {
		states[st] = true
	}
	out := make([]SearchResult, 0, len(res)+r.Neighbors)
	for i, x := range res {
		out = append(out, x)
		if i >= r.Neighbors {
			continue
		}
		next, err := s.Store.Messages(ctx, tenant, x.SessionID, MessageQuery{AfterSeq: x.Seq, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(next) == 0 || have[next[0].ID] || next[0].IsSummary() {
			continue
		}
		n := next[0]
		if (len(states) > 0 && !states[n.State]) || (!r.Since.IsZero() && n.CreatedAt.Before(r.Since)) || (!r.Until.IsZero() && n.CreatedAt.After(r.Until)) {
			continue
		}
		have[n.ID] = true
		out = append(out, SearchResult{Message: n, Score: x.Score, Via: "next_turn"})
	}
	if len(out) > r.K {
		out = out[:r.K]
	}
	return out, nil
}

// resolve fills hits in from the store, the truth: a hit the store no longer
// has (the index lags a delete) is left out.
func (s *Service) resolve(ctx context.Context, tenant string, hits []Hit) ([]SearchResult, error) {
	return s.resolveKnown(ctx, tenant, hits, nil)
}

// resolveKnown is resolve that takes the messages of known (resolved by the
// same search a moment ago) as they are, and reads only the others.
func (s *Service) resolveKnown(ctx context.Context, tenant string, hits []Hit, known map[string]*Message) ([]SearchResult, error) {
	ids := make([]string, 0, len(hits))
	byID := make(map[string]*Message, len(hits))
	for _, h := range hits {
		if m := known[h.ID]; m != nil {
			byID[h.ID] = m
		} else {
			ids = append(ids, h.ID)
		}
	}
	if len(ids) > 0 {
		msgs, err := s.Store.MessagesByID(ctx, tenant, ids, false)
		if err != nil {
			return nil, err
		}
		for _, m := range s.unexpired(msgs) {
			byID[m.ID] = m
		}
	}
	out := make([]SearchResult, 0, len(hits))
	for _, h := range hits {
		m := byID[h.ID]
		if m == nil {
			continue
		}
		out = append(out, SearchResult{Message: m, Score: h.Score, Highlight: h.Highlight,
			TextScore: h.TextScore, VectorScore: h.VectorScore, AuthorWeight: 1})
	}
	return out, nil
}
