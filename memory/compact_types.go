package memory

import (
	"time"
)

// ColdInfo is what a message keeps about its trip to cold storage. It is set
// when the message is dropped or summarized and kept when it is recovered.
type ColdInfo struct {
	DropReason       string    `json:"drop_reason"`
	RelevanceScore   float64   `json:"relevance_score"`
	Threshold        float64   `json:"threshold"`
	PromptAtDrop     string    `json:"prompt_at_drop"`
	DroppedAt        time.Time `json:"dropped_at"`
	RecoverableUntil time.Time `json:"recoverable_until"`
	SummaryID        string    `json:"summary_id,omitempty"` // the summary that replaced it
}

// Drop reasons.
const (
	ReasonLowRelevance = "low_relevance" // scored at or below relevance_cutoff
	ReasonSummarized   = "summarized"    // replaced by a summary
	ReasonBudget       = "budget"        // dropped lowest-first to reach the target
	// ReasonSummaryRolled: summarized once, and that section of the rolling
	// summary fell off as newer ones were added.
	ReasonSummaryRolled = "summary_rolled"
	// ReasonSummaryDeleted: summarized, and the summary was deleted
	// (DELETE /v1/messages/{id}); the original stays cold and recoverable.
	ReasonSummaryDeleted = "summary_deleted"
)

// SummaryRequest is one run of messages to summarize.
type SummaryRequest struct {
	Messages     []*Message
	TargetTokens int
	Encoding     string
	Prompt       string // what the agent is working on now: what to keep
}

// Summary is a summarizer's answer.
type Summary struct {
	Text   string
	Method string // "extractive", "llm", "annotation"
	Note   string // why a fallback was used, for the event log; "" if none
}

// Summary methods.
const (
	SummaryExtractive = "extractive"
	SummaryLLM        = "llm"
	SummaryAnnotation = "annotation"
)
