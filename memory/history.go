package memory

// Reading the event log back as typed history: a session's window size over
// time and its compactions, and the tuning figures (drop scores against
// the cutoff, recoveries per prompt, summary compression). Each reads a
// bounded tail of a stream, never a session's messages: a 100,000-message
// session costs what a 10-message one does.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// How many events of each stream the history and tuning read at most.
const (
	HistoryPoints      = 2000 // context-health events: one a write
	HistoryCompactions = 500
	TuningDrops        = 5000
	TuningRecoveries   = 2000
	TuningCompactions  = 1000
)

// TokenPoint is the window's cost at one instant.
type TokenPoint struct {
	At     time.Time
	Tokens int
}

// CompactionRecord is one compaction as the event log tells it.
type CompactionRecord struct {
	At                                     time.Time // when it finished
	StartedAt                              time.Time
	Trigger                                string
	TokensBefore, TokensAfter, Target      int
	Dropped, Summarized, Summaries, Pruned int
	SummarizedTokens, SummaryTokens        int // 0 in events older than these fields
	SummaryMethod                          string
	TookMS                                 float64
	ProtectedOnly                          bool
}

// Freed is how many tokens the compaction took off the window.
func (c CompactionRecord) Freed() int { return c.TokensBefore - c.TokensAfter }

// SessionHistory is a session's window over time, oldest first.
type SessionHistory struct {
	// Points: the window after each write (context-health), with each
	// compaction's before and after added at its start and end.
	Points      []TokenPoint
	Compactions []CompactionRecord
	// Cut says a stream had more events than were read: older ones are
	// left out.
	Cut bool
}

// SessionHistory reads the caller's session's last writes and compactions
// from the event log. EINVALID for a bad session id, EUNAVAILABLE when the
// server keeps no event log.
func (s *Service) SessionHistory(ctx context.Context, sessionID string) (*SessionHistory, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	health, err := s.tail(ctx, "context-health", sessionID, HistoryPoints)
	if err != nil {
		return nil, err
	}
	comp, err := s.tail(ctx, "compaction", sessionID, HistoryCompactions)
	if err != nil {
		return nil, err
	}
	h := &SessionHistory{Cut: len(health) == HistoryPoints || len(comp) == HistoryCompactions}
	// Points of one instant go compaction-before, compaction-after, then
	// the write's (logged after the compaction it set off): the order
	// they happened in, whatever the clock's resolution.
	type ranked struct {
		p    TokenPoint
		rank int
	}
	var pts []ranked
	for _, e := range health {
		pts = append(pts, ranked{TokenPoint{At: eventTime(e, "time"), Tokens: eventInt(e, "tokens")}, 2})
	}
	for _, e := range comp {
		c := compactionRecord(e)
		h.Compactions = append(h.Compactions, c)
		pts = append(pts, ranked{TokenPoint{At: c.StartedAt, Tokens: c.TokensBefore}, 0}, ranked{TokenPoint{At: c.At, Tokens: c.TokensAfter}, 1})
	}
	slices.SortStableFunc(pts, func(a, b ranked) int {
		if c := a.p.At.Compare(b.p.At); c != 0 {
			return c
		}
		return a.rank - b.rank
	})
	for _, r := range pts {
		h.Points = append(h.Points, r.p)
	}
	return h, nil
}

func compactionRecord(e map[string]any) CompactionRecord {
	c := CompactionRecord{At: eventTime(e, "time"), Trigger: eventString(e, "trigger"),
		TokensBefore: eventInt(e, "tokens_before"), TokensAfter: eventInt(e, "tokens_after"), Target: eventInt(e, "target"),
		Dropped: eventInt(e, "dropped"), Summarized: eventInt(e, "summarized"), Pruned: eventInt(e, "pruned"),
		SummarizedTokens: eventInt(e, "summarized_tokens"), SummaryTokens: eventInt(e, "summary_tokens"),
		SummaryMethod: eventString(e, "summary_method"), TookMS: eventFloat(e, "took_ms")}
	if ids, ok := e["summaries"].([]any); ok {
		c.Summaries = len(ids)
	}
	c.ProtectedOnly, _ = e["protected_only"].(bool)
	// The start is the end less the time taken, on the event log's clock:
	// started_at is the process's wall clock, which a server with an
	// injected clock (tests, replays) does not share with its log.
	c.StartedAt = c.At.Add(-time.Duration(c.TookMS * float64(time.Millisecond)))
	return c
}

// DropBins is how many bins the drop-score histogram has over [0, 1].
const DropBins = 20

// DropStats is the distribution of the scores messages were dropped or
// summarized with.
type DropStats struct {
	Count int
	// Bins[i] counts scores in [i/DropBins, (i+1)/DropBins), by drop
	// reason; scores outside [0, 1] count in the first or last bin.
	Bins [DropBins]map[string]int
	// Cutoff is the relevance cutoff of the newest drop; Cutoffs every
	// cutoff seen, when the policy changed within the events read.
	Cutoff  float64
	Cutoffs []float64
	// AtOrBelow counts the drops that scored at or under their cutoff.
	AtOrBelow int
	Median    float64
	Reasons   map[string]int
	Tokens    int
}

// PromptRecoveries is what came back for one prompt.
type PromptRecoveries struct {
	Prompt     string // "" for recoveries by id (a person or a client asked)
	Count      int
	AnswerOnly int // sent in the window but left cold
	Tokens     int
	MeanScore  float64
	Sessions   int
	Last       time.Time
}

// Compression is how much the summaries condensed what they replaced.
type Compression struct {
	Compactions      int // with a summary whose size the log records
	SummarizedTokens int
	SummaryTokens    int
	Ratio            float64 // SummarizedTokens / SummaryTokens; 0 without data
	Freed            int     // tokens all compactions read took off windows
}

// Tuning is what a person tuning the compaction policy wants to see.
type Tuning struct {
	Drops      DropStats
	Recoveries []PromptRecoveries // newest prompt first
	Compression
	// Cut says a stream had more events than were read.
	Cut bool
}

// maxTuningPrompts bounds the prompts Tuning lists.
const maxTuningPrompts = 50

// Tuning reads the caller's drops, recoveries and compactions from the
// event log: of one session, or of all its sessions when sessionID is "".
// EINVALID for a bad session id, EUNAVAILABLE without an event log.
func (s *Service) Tuning(ctx context.Context, sessionID string) (*Tuning, error) {
	if sessionID != "" {
		if err := ValidateSessionID(sessionID); err != nil {
			return nil, err
		}
	}
	drops, err := s.tail(ctx, "drops", sessionID, TuningDrops)
	if err != nil {
		return nil, err
	}
	recs, err := s.tail(ctx, "recoveries", sessionID, TuningRecoveries)
	if err != nil {
		return nil, err
	}
	comps, err := s.tail(ctx, "compaction", sessionID, TuningCompactions)
	if err != nil {
		return nil, err
	}
	t := &Tuning{Drops: dropStats(drops), Recoveries: promptRecoveries(recs),
		Cut: len(drops) == TuningDrops || len(recs) == TuningRecoveries || len(comps) == TuningCompactions}
	for _, e := range comps {
		c := compactionRecord(e)
		t.Freed += c.Freed()
		if c.SummaryTokens > 0 {
			t.Compression.Compactions++
			t.SummarizedTokens += c.SummarizedTokens
			t.SummaryTokens += c.SummaryTokens
		}
	}
	if t.SummaryTokens > 0 {
		t.Ratio = float64(t.SummarizedTokens) / float64(t.SummaryTokens)
	}
	return t, nil
}

func dropStats(events []map[string]any) DropStats {
	d := DropStats{Reasons: map[string]int{}}
	for i := range d.Bins {
		d.Bins[i] = map[string]int{}
	}
	var scores []float64
	seen := map[float64]bool{}
	for _, e := range events {
		// A superseded gateway tail is logged as one event naming its
		// messages: it was not scored, so it has no place here.
		if _, ok := e["chunk"]; !ok {
			continue
		}
		score, cutoff, reason := eventFloat(e, "score"), eventFloat(e, "threshold"), eventString(e, "reason")
		d.Count++
		d.Reasons[reason]++
		d.Tokens += eventInt(e, "tokens")
		bin := min(max(int(score*DropBins), 0), DropBins-1)
		d.Bins[bin][reason]++
		if score <= cutoff {
			d.AtOrBelow++
		}
		d.Cutoff = cutoff
		if !seen[cutoff] {
			seen[cutoff] = true
			d.Cutoffs = append(d.Cutoffs, cutoff)
		}
		scores = append(scores, score)
	}
	if len(d.Cutoffs) < 2 {
		d.Cutoffs = nil
	}
	if n := len(scores); n > 0 {
		slices.Sort(scores)
		d.Median = scores[n/2]
		if n%2 == 0 {
			d.Median = (scores[n/2-1] + scores[n/2]) / 2
		}
	}
	return d
}

func promptRecoveries(events []map[string]any) []PromptRecoveries {
	byPrompt := map[string]*PromptRecoveries{}
	sessions := map[string]map[string]bool{}
	var order []*PromptRecoveries
	for _, e := range events {
		prompt := strings.TrimSpace(eventString(e, "prompt"))
		p := byPrompt[prompt]
		if p == nil {
			p = &PromptRecoveries{Prompt: prompt}
			byPrompt[prompt], sessions[prompt] = p, map[string]bool{}
			order = append(order, p)
		}
		p.Count++
		p.Tokens += eventInt(e, "tokens")
		p.MeanScore += eventFloat(e, "score")
		if b, _ := e["answer_only"].(bool); b {
			p.AnswerOnly++
		}
		sessions[prompt][eventString(e, "session")] = true
		if at := eventTime(e, "time"); at.After(p.Last) {
			p.Last = at
		}
	}
	out := make([]PromptRecoveries, 0, len(order))
	for _, p := range order {
		p.MeanScore /= float64(p.Count)
		p.Sessions = len(sessions[p.Prompt])
		out = append(out, *p)
	}
	slices.SortStableFunc(out, func(a, b PromptRecoveries) int { return b.Last.Compare(a.Last) })
	if len(out) > maxTuningPrompts {
		out = out[:maxTuningPrompts]
	}
	return out
}

// tail is TailEvents without the API's bound on n: the caller's last n
// events of a stream (log name), of one session or all.
func (s *Service) tail(ctx context.Context, stream, sessionID string, n int) ([]map[string]any, error) {
	if s.EventReader == nil {
		return nil, Errorf(EUNAVAILABLE, "this server keeps no event log")
	}
	tenant := TenantFromContext(ctx)
	events, err := s.EventReader.Tail(stream, n, func(e map[string]any) bool {
		return e["tenant"] == tenant && (sessionID == "" || e["session"] == sessionID)
	})
	if err != nil {
		return nil, fmt.Errorf("read %s events: %w", stream, err)
	}
	return events, nil
}

// Events hold numbers as json.Number (the eventlog reader) or float64 (any
// JSON decoder); a field missing or of another type reads as zero.
func eventFloat(e map[string]any, key string) float64 {
	switch v := e[key].(type) {
	case json.Number:
		f, _ := v.Float64()
		return f
	case float64:
		return v
	case int:
		return float64(v)
	}
	return 0
}

func eventInt(e map[string]any, key string) int {
	f := eventFloat(e, key)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return int(f)
}

func eventString(e map[string]any, key string) string {
	v, _ := e[key].(string)
	return v
}

func eventTime(e map[string]any, key string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, eventString(e, key))
	return t
}
