package memory

import (
	"encoding/json"
	"fmt"
)

// Policy is everything that decides when and how a session is compacted. The
// server has one (from its config file), and a session may override any field
// (PUT /v1/sessions/{id}). YAML and JSON names are the config's names.
type Policy struct {
	TriggerPct           float64 `json:"compaction_trigger_pct" yaml:"compaction_trigger_pct"`
	MaxPct               float64 `json:"max_context_pct" yaml:"max_context_pct"`
	TargetPct            float64 `json:"target_pct" yaml:"target_pct"`
	ReserveTokens        int     `json:"reserve_tokens" yaml:"reserve_tokens"`
	FlushThresholdTokens int     `json:"flush_threshold_tokens" yaml:"flush_threshold_tokens"`
	RelevanceCutoff      float64 `json:"relevance_cutoff" yaml:"relevance_cutoff"`
	MinChunksToKeep      int     `json:"min_chunks_to_keep" yaml:"min_chunks_to_keep"`
	KeepRecent           int     `json:"keep_recent" yaml:"keep_recent"`
	RecoverableForDays   int     `json:"recoverable_for_days" yaml:"recoverable_for_days"`
	SummaryTargetTokens  int     `json:"summary_target_tokens" yaml:"summary_target_tokens"`
	ToolTrimChars        int     `json:"tool_trim_chars" yaml:"tool_trim_chars"`
	ToolKeepHeadChars    int     `json:"tool_keep_head_chars" yaml:"tool_keep_head_chars"`
	ToolKeepTailChars    int     `json:"tool_keep_tail_chars" yaml:"tool_keep_tail_chars"`
	ToolTrimAfterTurns   int     `json:"tool_trim_after_turns" yaml:"tool_trim_after_turns"`
	ToolClearAfterTurns  int     `json:"tool_clear_after_turns" yaml:"tool_clear_after_turns"`
	// ToolResultMaxPct is the share of the context window the results of
	// one tool call may take together; a larger result is cut head + tail
	// in the window (the stored original stays whole).
	ToolResultMaxPct     float64 `json:"tool_result_max_pct" yaml:"tool_result_max_pct"`
	WeightSimilarity     float64 `json:"weight_similarity" yaml:"weight_similarity"`
	WeightRecency        float64 `json:"weight_recency" yaml:"weight_recency"`
	WeightReferences     float64 `json:"weight_references" yaml:"weight_references"`
	WeightImportance     float64 `json:"weight_importance" yaml:"weight_importance"`
	RecencyHalfLifeTurns float64 `json:"recency_half_life_turns" yaml:"recency_half_life_turns"`
	// PinnedMaxPct is the share of the context window that pinned and
	// system messages may take together; a write past it is refused.
	PinnedMaxPct float64 `json:"pinned_max_pct" yaml:"pinned_max_pct"`
}

// DefaultPolicy is the documented default.
var DefaultPolicy = Policy{
	TriggerPct:           0.50,
	MaxPct:               0.85,
	TargetPct:            0.35,
	ReserveTokens:        4096,
	FlushThresholdTokens: 4000,
	RelevanceCutoff:      0.05,
	MinChunksToKeep:      6,
	KeepRecent:           6,
	RecoverableForDays:   30,
	SummaryTargetTokens:  500,
	ToolTrimChars:        4000,
	ToolKeepHeadChars:    1500,
	ToolKeepTailChars:    1500,
	ToolTrimAfterTurns:   2,
	ToolClearAfterTurns:  4,
	// A quarter: with the trigger at a half and the hard limit at 0.85,
	// one call's output can land on a window at the trigger and leave
	// room under the hard limit for the compaction it causes.
	ToolResultMaxPct: 0.25,
	// Weights measured on LoCoMo dev, evidence in window (window 4096,
	// budget 2048), overall %, similarity/recency/references/importance:
	// 0.45/0.25/0.20/0.10 81.6, 0.60/0.15/0.15/0.10 83.4, 0.45/0.35/0.10/0.10
	// 80.7, 0.70/0.20/0/0.10 81.5, 0.35/0.25/0.30/0.10 81.9 (runs vary ~2).
	WeightSimilarity:     0.60,
	WeightRecency:        0.15,
	WeightReferences:     0.15,
	WeightImportance:     0.10,
	RecencyHalfLifeTurns: 24,
	// A quarter of the window: an agent that writes a pinned note on every
	// flush prompt is stopped with a clear error long before pinned
	// messages crowd the working window out (the window builder refuses
	// every context call once they outgrow max_tokens).
	PinnedMaxPct: 0.25,
}

// Validate checks that the policy makes sense, naming the field that does not.
func (p Policy) Validate() error {
	bad := func(field string, format string, args ...any) error {
		return Errorf(EINVALID, "%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case p.TriggerPct <= 0 || p.TriggerPct >= 1:
		return bad("compaction_trigger_pct", "%v is outside (0, 1)", p.TriggerPct)
	case p.MaxPct <= p.TriggerPct || p.MaxPct > 1:
		return bad("max_context_pct", "%v must be above compaction_trigger_pct (%v) and at most 1", p.MaxPct, p.TriggerPct)
	case p.TargetPct <= 0 || p.TargetPct >= p.TriggerPct:
		return bad("target_pct", "%v must be above 0 and below compaction_trigger_pct (%v)", p.TargetPct, p.TriggerPct)
	case p.ReserveTokens < 0:
		return bad("reserve_tokens", "must not be negative")
	case p.FlushThresholdTokens < 0:
		return bad("flush_threshold_tokens", "must not be negative")
	case p.RelevanceCutoff < 0 || p.RelevanceCutoff >= 1:
		return bad("relevance_cutoff", "%v is outside [0, 1)", p.RelevanceCutoff)
	case p.MinChunksToKeep < 0 || p.KeepRecent < 0:
		return bad("keep_recent", "min_chunks_to_keep and keep_recent must not be negative")
	case p.RecoverableForDays < 1 || p.RecoverableForDays > MaxRecoverableForDays:
		return bad("recoverable_for_days", "%d is outside 1..%d", p.RecoverableForDays, MaxRecoverableForDays)
	case p.SummaryTargetTokens < 16:
		return bad("summary_target_tokens", "must be at least 16")
	case p.ToolTrimChars < 1 || p.ToolKeepHeadChars < 0 || p.ToolKeepTailChars < 0 ||
		p.ToolKeepHeadChars+p.ToolKeepTailChars >= p.ToolTrimChars:
		return bad("tool_trim_chars", "must exceed tool_keep_head_chars + tool_keep_tail_chars")
	case p.ToolResultMaxPct <= 0 || p.ToolResultMaxPct > 1:
		return bad("tool_result_max_pct", "%v is outside (0, 1]", p.ToolResultMaxPct)
	case p.ToolTrimAfterTurns < 0 || p.ToolClearAfterTurns < p.ToolTrimAfterTurns:
		return bad("tool_clear_after_turns", "must be at least tool_trim_after_turns")
	case p.WeightSimilarity < 0 || p.WeightRecency < 0 || p.WeightReferences < 0 || p.WeightImportance < 0 ||
		p.WeightSimilarity+p.WeightRecency+p.WeightReferences+p.WeightImportance <= 0:
		return bad("weight_similarity", "weights must be non-negative with a positive sum")
	case max(p.WeightSimilarity, p.WeightRecency, p.WeightReferences, p.WeightImportance) > MaxWeight:
		return bad("weight_similarity", "weights must be at most %d", MaxWeight)
	case p.RecencyHalfLifeTurns <= 0:
		return bad("recency_half_life_turns", "must be positive")
	case !(p.PinnedMaxPct > 0 && p.PinnedMaxPct <= 1):
		return bad("pinned_max_pct", "%v is outside (0, 1]", p.PinnedMaxPct)
	}
	return nil
}

// Budget is the window-state part of the policy.
func (p Policy) Budget() Budget {
	return Budget{TriggerPct: p.TriggerPct, MaxPct: p.MaxPct, FlushThreshold: p.FlushThresholdTokens}
}

// PolicyOverrides are a session's own values; nil fields use the server's.
type PolicyOverrides struct {
	TriggerPct           *float64 `json:"compaction_trigger_pct,omitempty"`
	MaxPct               *float64 `json:"max_context_pct,omitempty"`
	TargetPct            *float64 `json:"target_pct,omitempty"`
	ReserveTokens        *int     `json:"reserve_tokens,omitempty"`
	FlushThresholdTokens *int     `json:"flush_threshold_tokens,omitempty"`
	RelevanceCutoff      *float64 `json:"relevance_cutoff,omitempty"`
	MinChunksToKeep      *int     `json:"min_chunks_to_keep,omitempty"`
	KeepRecent           *int     `json:"keep_recent,omitempty"`
	RecoverableForDays   *int     `json:"recoverable_for_days,omitempty"`
	SummaryTargetTokens  *int     `json:"summary_target_tokens,omitempty"`
	ToolTrimChars        *int     `json:"tool_trim_chars,omitempty"`
	ToolKeepHeadChars    *int     `json:"tool_keep_head_chars,omitempty"`
	ToolKeepTailChars    *int     `json:"tool_keep_tail_chars,omitempty"`
	ToolTrimAfterTurns   *int     `json:"tool_trim_after_turns,omitempty"`
	ToolClearAfterTurns  *int     `json:"tool_clear_after_turns,omitempty"`
	ToolResultMaxPct     *float64 `json:"tool_result_max_pct,omitempty"`
	WeightSimilarity     *float64 `json:"weight_similarity,omitempty"`
	WeightRecency        *float64 `json:"weight_recency,omitempty"`
	WeightReferences     *float64 `json:"weight_references,omitempty"`
	WeightImportance     *float64 `json:"weight_importance,omitempty"`
	RecencyHalfLifeTurns *float64 `json:"recency_half_life_turns,omitempty"`
	PinnedMaxPct         *float64 `json:"pinned_max_pct,omitempty"`
}

// Apply returns p with the set overrides.
func (o *PolicyOverrides) Apply(p Policy) Policy {
	if o == nil {
		return p
	}
	setF := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	setI := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setF(&p.TriggerPct, o.TriggerPct)
	setF(&p.MaxPct, o.MaxPct)
	setF(&p.TargetPct, o.TargetPct)
	setI(&p.ReserveTokens, o.ReserveTokens)
	setI(&p.FlushThresholdTokens, o.FlushThresholdTokens)
	setF(&p.RelevanceCutoff, o.RelevanceCutoff)
	setI(&p.MinChunksToKeep, o.MinChunksToKeep)
	setI(&p.KeepRecent, o.KeepRecent)
	setI(&p.RecoverableForDays, o.RecoverableForDays)
	setI(&p.SummaryTargetTokens, o.SummaryTargetTokens)
	setI(&p.ToolTrimChars, o.ToolTrimChars)
	setI(&p.ToolKeepHeadChars, o.ToolKeepHeadChars)
	setI(&p.ToolKeepTailChars, o.ToolKeepTailChars)
	setI(&p.ToolTrimAfterTurns, o.ToolTrimAfterTurns)
	setI(&p.ToolClearAfterTurns, o.ToolClearAfterTurns)
	setF(&p.ToolResultMaxPct, o.ToolResultMaxPct)
	setF(&p.WeightSimilarity, o.WeightSimilarity)
	setF(&p.WeightRecency, o.WeightRecency)
	setF(&p.WeightReferences, o.WeightReferences)
	setF(&p.WeightImportance, o.WeightImportance)
	setF(&p.RecencyHalfLifeTurns, o.RecencyHalfLifeTurns)
	setF(&p.PinnedMaxPct, o.PinnedMaxPct)
	return p
}

// Merge sets in o every field that n sets.
func (o *PolicyOverrides) Merge(n *PolicyOverrides) *PolicyOverrides {
	if n == nil {
		return o
	}
	if o == nil {
		o = &PolicyOverrides{}
	}
	out := *o
	b := mergeJSON(&out, n)
	return b
}

// mergeJSON copies src's set fields onto dst: the JSON form of overrides
// holds exactly the fields that are set.
func mergeJSON(dst, src *PolicyOverrides) *PolicyOverrides {
	b, err := json.Marshal(src)
	if err == nil {
		err = json.Unmarshal(b, dst)
	}
	if err != nil {
		panic(fmt.Sprintf("merge policy overrides: %v", err)) // plain struct of pointers: cannot fail
	}
	return dst
}
