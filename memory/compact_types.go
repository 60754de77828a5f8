package memory

import (
	"context"
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

// Summarizer condenses a contiguous run of messages into one text.
type Summarizer interface {
	// Summarize returns a summary of req.Messages that fits req.TargetTokens
	// (exact count in req.Encoding). It must not fail for want of a network:
	// implementations fall back and say so in Summary.Method and Note.
	Summarize(ctx context.Context, req SummaryRequest) (Summary, error)
}

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

// EventLog records what the server did, as JSONL streams under logs/.
type EventLog interface {
	// Log appends one event to the named stream ("compaction", "drops",
	// "recoveries", "context-health"). Events carry their own fields; the
	// log adds the time.
	Log(stream string, event map[string]any) error
}

// ColdMirror keeps an inspectable copy of cold chunks (JSONL per session):
// a line for every original that went cold since the last purge, written
// when it first did (dropped again after a recovery, or released by a
// rolled summary, it keeps that line; if a file holds two lines of an id,
// the last is current). The store is the truth; the mirror can be rebuilt
// from it, and start-up and verify compare the two.
type ColdMirror interface {
	// Append adds chunks durably (fsynced) before returning.
	Append(tenant, sessionID string, msgs []*Message) error
	// Rewrite replaces a session's chunks atomically.
	Rewrite(tenant, sessionID string, msgs []*Message) error
	// Remove forgets a session.
	Remove(tenant, sessionID string) error
}
