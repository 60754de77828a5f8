// Package api declares the JSON bodies of the ctxd HTTP API
// (docs/API.md) once: the server (httpapi) decodes the requests and
// encodes the answers with these types, and the client package sends and
// reads the same ones, so a renamed field changes both sides together.
//
// Where a domain type is already what the wire carries (memory.Status,
// memory.CompactionReport, memory.ContextBudget, memory.ToolCall), it is
// used as it is rather than copied.
package api

import (
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/scoring"
)

// MessageIn is a message as a client sends it
// (POST /v1/sessions/{id}/messages).
type MessageIn struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Name       string            `json:"name,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
	ToolCalls  []memory.ToolCall `json:"tool_calls,omitempty"`
	Important  bool              `json:"important,omitempty"`
	Pinned     bool              `json:"pinned,omitempty"`
	// Metadata values are strings, numbers or booleans.
	Metadata map[string]any `json:"metadata,omitempty"`
	// CreatedAt is RFC 3339; empty: the time the server stores it. A string
	// rather than a time.Time so that the server, not Go's decoder, says
	// what is wrong with a bad one.
	CreatedAt string `json:"created_at,omitempty"`
	// MessageID is the client's own id: a message whose id the session
	// holds already is not stored again, which makes a write that carries
	// one on every message safe to retry.
	MessageID string `json:"message_id,omitempty"`
}

// Message is a stored message as the server returns it.
type Message struct {
	ID         string            `json:"id"`
	SessionID  string            `json:"session_id"`
	Role       memory.Role       `json:"role"`
	Content    string            `json:"content"`
	Name       string            `json:"name,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
	ToolCalls  []memory.ToolCall `json:"tool_calls,omitempty"`
	Important  bool              `json:"important"`
	Pinned     bool              `json:"pinned"`
	Metadata   map[string]any    `json:"metadata"`
	CreatedAt  time.Time         `json:"created_at"`
	Tokens     int               `json:"tokens"`
	State      memory.State      `json:"state"`
	Kind       string            `json:"kind,omitempty"`
	Sources    []string          `json:"sources,omitempty"`
	MessageID  string            `json:"message_id,omitempty"`
	Versions   []string          `json:"versions,omitempty"`
	VersionOf  string            `json:"version_of,omitempty"`
}

// SessionIn is the body of PUT /v1/sessions/{id}; every field is optional.
type SessionIn struct {
	ContextWindow *int           `json:"context_window,omitempty"`
	Encoding      *string        `json:"encoding,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	memory.PolicyOverrides
	// Policy is the nested form the status shows (GET, then PUT back with
	// a change): the same names as the top-level overrides.
	Policy *memory.PolicyOverrides `json:"policy,omitempty"`
}

// AppendIn is the body of POST /v1/sessions/{id}/messages.
type AppendIn struct {
	Messages []MessageIn `json:"messages"`
}

// AppendOut answers POST /v1/sessions/{id}/messages.
type AppendOut struct {
	IDs     []string       `json:"ids"`
	Tokens  []int          `json:"tokens"`
	Session *memory.Status `json:"session"`
	// Compaction is the report of the compaction this write triggered; nil
	// when it triggered none.
	Compaction *memory.CompactionReport `json:"compaction"`
}

// MessagePatch is the body of PATCH /v1/messages/{id}: the fields to
// change, each left out when nil.
type MessagePatch struct {
	Content   *string `json:"content,omitempty"`
	Pinned    *bool   `json:"pinned,omitempty"`
	Important *bool   `json:"important,omitempty"`
	// Metadata replaces the message's metadata; a pointer to a nil map
	// clears it.
	Metadata *map[string]any `json:"metadata,omitempty"`
}

// CompactIn is the body of POST /v1/sessions/{id}/compact.
type CompactIn struct {
	// Prompt is what the agent works on now; empty: the last user message.
	Prompt string `json:"prompt"`
	DryRun bool   `json:"dry_run"`
}

// ColdChunk is a cold message as GET /v1/sessions/{id}/cold lists it.
type ColdChunk struct {
	Message
	DropReason       string    `json:"drop_reason"`
	RelevanceScore   float64   `json:"relevance_score"`
	PromptAtDrop     string    `json:"prompt_at_drop"`
	RecoverableUntil time.Time `json:"recoverable_until"`
	DroppedAt        time.Time `json:"dropped_at"`
	SummaryID        string    `json:"summary_id,omitempty"`
}

// SearchIn is the body of POST /v1/search.
type SearchIn struct {
	Query     string   `json:"query"`
	SessionID string   `json:"session_id,omitempty"`
	Sessions  []string `json:"sessions,omitempty"`
	K         int      `json:"k,omitempty"`    // 0: the server's default
	Mode      string   `json:"mode,omitempty"` // hybrid (default), text or vector
	States    []string `json:"states,omitempty"`
	Since     string   `json:"since,omitempty"` // RFC 3339
	Until     string   `json:"until,omitempty"`
	// Neighbors is how many turns around each hit come with it; nil: the
	// server's --search-neighbors.
	Neighbors *int `json:"neighbors,omitempty"`
}

// SearchResult is one hit of a search.
type SearchResult struct {
	Message
	Score     float64 `json:"score"`
	Highlight string  `json:"highlight,omitempty"`
	Via       string  `json:"via,omitempty"`
	// ScoreParts says why a result ranks; absent for one brought along by
	// neighbors.
	ScoreParts *ScoreParts `json:"score_parts,omitempty"`
}

// ScoreParts are the components of a search result's score: each side's
// score normalised over its candidates (0: that side did not find it),
// fused into the index's score, what the turns next to it in the session
// added, what stating a time added for a query that asks when (0.1), and
// the author weight: 0.6 when the query names another of the results'
// authors and not this one's, else 1, also for a message without a name
// (searches of a few sessions; score is (the fused score + neighbor +
// when) * author).
type ScoreParts struct {
	Text     float64 `json:"text"`
	Vector   float64 `json:"vector"`
	Neighbor float64 `json:"neighbor"`
	When     float64 `json:"when"`
	Author   float64 `json:"author"`
	// Feedback are the terms (stemmed) the search learnt from its own
	// best first results that this result has: they are part of Text.
	Feedback []string `json:"feedback,omitempty"`
}

// SearchOut answers POST /v1/search, best first.
type SearchOut struct {
	Results []SearchResult `json:"results"`
}

// ContextIn is the body of POST /v1/sessions/{id}/context.
type ContextIn struct {
	Prompt string `json:"prompt"`
	// MaxTokens absent or null: the session's default. 0 is refused: it
	// read as "the default" while -1 was refused, so a client computing a
	// budget that came out 0 got a full window instead of an error.
	MaxTokens *int `json:"max_tokens,omitempty"`
	Explain   bool `json:"explain,omitempty"`
	// DryRun builds the window the call would build and changes nothing:
	// no cold message is recovered, no compaction runs (WouldCompact says
	// when one would have).
	DryRun bool `json:"dry_run,omitempty"`
	// Format "openai" answers plain chat messages (ContextChat); "" or
	// "ctxd" the full form (Context).
	Format string `json:"format,omitempty"`
}

// Context answer formats.
const (
	FormatCtxd   = "ctxd"
	FormatOpenAI = "openai"
)

// WindowMessage is a message of the context window: sendable as is (role,
// content, name, tool_call_id, tool_calls) plus where it came from.
type WindowMessage struct {
	Message
	Source     string              `json:"source"`
	Score      float64             `json:"score"`
	Components *scoring.Components `json:"components,omitempty"`
	PruneLevel int                 `json:"prune_level,omitempty"`
}

// Window answers POST /v1/sessions/{id}/context: the messages of the
// window, in chronological order, as M.
type Window[M any] struct {
	Messages []M `json:"messages"`
	Tokens   int `json:"tokens"`
	// StablePrefix is how many leading messages repeat the session's
	// previous window exactly: a client caching prompts puts its
	// breakpoint on Messages[StablePrefix-1] (see memory.ContextResult).
	StablePrefix int `json:"stable_prefix"`
	// StableUntil is how many leading messages the next window repeats
	// (everything before the per-prompt recall block): a client caching
	// prompts writes its breakpoint on Messages[StableUntil-1].
	StableUntil int                  `json:"stable_until"`
	Recovered   []string             `json:"recovered"`
	AnswerOnly  []string             `json:"answer_only,omitempty"`
	Budget      memory.ContextBudget `json:"budget"`
	// WouldCompact (dry runs only): the session is past its hard limit, so
	// a real call would compact it first.
	WouldCompact bool `json:"would_compact,omitempty"`
}

// Context is the window in the ctxd format.
type Context = Window[WindowMessage]

// ContextChat is the window in the openai format.
type ContextChat = Window[ChatMessage]

// ChatMessage is a message as an OpenAI-style chat API takes it, and
// nothing else: such APIs may refuse fields they do not know.
type ChatMessage struct {
	Role       memory.Role       `json:"role"`
	Content    string            `json:"content"`
	Name       string            `json:"name,omitempty"`
	ToolCalls  []memory.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

// The listings page with limit and cursor; an empty NextCursor is the last
// page. Fields are in the order the server always wrote them (sorted).

// SessionList answers GET /v1/sessions.
type SessionList struct {
	NextCursor string           `json:"next_cursor"`
	Sessions   []*memory.Status `json:"sessions"`
}

// MessageList answers GET /v1/sessions/{id}/messages, oldest first.
type MessageList struct {
	Messages   []Message `json:"messages"`
	NextCursor string    `json:"next_cursor"`
}

// ColdList answers GET /v1/sessions/{id}/cold.
type ColdList struct {
	Chunks     []ColdChunk `json:"chunks"`
	NextCursor string      `json:"next_cursor"`
}

// Event is one event of a stream: its fields depend on the stream (see
// `ctxd logs`); every event has "time" and "session".
type Event = map[string]any

// EventList answers GET /v1/events/{stream}, oldest first.
type EventList struct {
	Events []Event `json:"events"`
}

// Health answers GET /healthz.
type Health struct {
	Status string `json:"status"`
	// Version is the running build: module version and commit.
	Version string `json:"version,omitempty"`
}

// Ready answers GET /readyz: the store and indexes are open.
type Ready struct {
	// IndexLag is how many stored changes the search index has yet to take in.
	IndexLag uint64 `json:"index_lag"`
	Status   string `json:"status"`
}

// ErrorBody is every non-2xx answer's body.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the code a program acts on (memory's error codes) and the
// message a person reads.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Headers of the API.
const (
	// IdempotencyKeyHeader makes a retried write store nothing twice.
	IdempotencyKeyHeader = "Idempotency-Key"
	// TenantHeader lets an admin key act as another tenant.
	TenantHeader = "X-Ctxd-Tenant"
)

// Headers of the gateway's model endpoints (POST /v1/chat/completions,
// POST /v1/messages), where the provider's key keeps Authorization or
// x-api-key.
const (
	// GatewayKeyHeader carries ctxd's own API key.
	GatewayKeyHeader = "X-Ctxd-Key"
	// GatewaySessionHeader names the session of a call, and answers it.
	GatewaySessionHeader = "X-Ctxd-Session"
	// GatewayContextWindowHeader overrides the model's window, in tokens.
	GatewayContextWindowHeader = "X-Ctxd-Context-Window"
	// What ctxd did for the call: the window's tokens in ctxd's count,
	// whether a compaction ran, and how many cold messages came back.
	GatewayTokensHeader    = "X-Ctxd-Tokens"
	GatewayCompactedHeader = "X-Ctxd-Compacted"
	GatewayRecoveredHeader = "X-Ctxd-Recovered"
	// GatewayMaxTokensHeader answers the answer limit ctxd sent when it
	// lowered the client's to fit the window (absent otherwise).
	GatewayMaxTokensHeader = "X-Ctxd-Max-Tokens"
)
