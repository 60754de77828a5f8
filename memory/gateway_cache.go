package memory

import (
	"context"
	"fmt"
	"math"
)

// PromptUsage is what one answer's usage said of its prompt, in the
// provider's count: all of it, the part read from the prompt cache, and
// the part written to it (Anthropic bills writes; OpenAI reports none).
type PromptUsage struct {
	Input, CacheRead, CacheWrite int
}

// PromptCache is a session's prompt cache figures over its gateway calls.
// HitRate is the share of input tokens read from the cache; SavedPct the
// share of the input's cost saved, with cached reads billed at a tenth
// and cache writes at 1.25 (Anthropic's and OpenAI's published rates).
type PromptCache struct {
	Calls       int     `json:"calls"`
	InputTokens int     `json:"input_tokens"`
	CachedRead  int     `json:"cache_read_tokens"`
	CacheWrite  int     `json:"cache_write_tokens"`
	HitRate     float64 `json:"hit_rate"`
	SavedPct    float64 `json:"input_cost_saved_pct"`
}

// Billing multipliers of cached input, as the providers publish them.
const (
	cacheReadPrice  = 0.1
	cacheWritePrice = 1.25
)

// WithRates returns c with HitRate and SavedPct derived from its token
// counts (the store keeps only the counts); nil stays nil.
func (c *PromptCache) WithRates() *PromptCache {
	if c == nil || c.InputTokens == 0 {
		return c
	}
	out := *c
	in := float64(c.InputTokens)
	out.HitRate = round4(float64(c.CachedRead) / in)
	saved := float64(c.CachedRead)*(1-cacheReadPrice) - float64(c.CacheWrite)*(cacheWritePrice-1)
	out.SavedPct = math.Round(saved/in*10000) / 100
	return &out
}

// RecordUsage adds one answer's prompt usage to the session's cache
// figures. An answer without usage (a stream the client did not ask usage
// for) adds nothing.
func (g *Gateway) RecordUsage(ctx context.Context, session string, u PromptUsage) error {
	if u.Input <= 0 {
		return nil
	}
	tenant := TenantFromContext(ctx)
	unlock, err := g.lock(ctx, tenant, session)
	if err != nil {
		return err
	}
	defer unlock()
	_, err = g.s.Store.Update(ctx, tenant, session, func(tx SessionTx) error {
		s := tx.Session()
		if s.PromptCache == nil {
			s.PromptCache = &PromptCache{}
		}
		c := s.PromptCache
		c.Calls++
		c.InputTokens += u.Input
		c.CachedRead += u.CacheRead
		c.CacheWrite += u.CacheWrite
		c.HitRate, c.SavedPct = 0, 0 // derived when read
		// Calibrate ran for this answer just before: its ratio goes with
		// the session, for the other nodes (see loadRatio).
		s.Calibration = 0
		if r := g.ratio(tenant, session); r > minRatio {
			s.Calibration = r
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The metrics read the event: totals over every session, without a
	// scan of them.
	g.s.event("prompt-cache", map[string]any{"tenant": tenant, "session": session,
		"input_tokens": u.Input, "cache_read_tokens": u.CacheRead, "cache_write_tokens": u.CacheWrite})
	return nil
}

// PromptCacheTotal adds up the prompt cache figures of every session of
// the caller: the dashboard's figure for all sessions. It reads every
// session record of the tenant (records, not messages), as a listing in
// any order but id's does; nil when no session has any.
func (s *Service) PromptCacheTotal(ctx context.Context) (*PromptCache, error) {
	tenant := TenantFromContext(ctx)
	var total *PromptCache
	after := ""
	for {
		batch, err := s.Store.Sessions(ctx, tenant, after, sessionScanBatch)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		for _, sess := range batch {
			if c := sess.PromptCache; c != nil {
				if total == nil {
					total = &PromptCache{}
				}
				total.Calls += c.Calls
				total.InputTokens += c.InputTokens
				total.CachedRead += c.CachedRead
				total.CacheWrite += c.CacheWrite
			}
		}
		if len(batch) < sessionScanBatch {
			return total.WithRates(), nil
		}
		after = batch[len(batch)-1].ID
	}
}
