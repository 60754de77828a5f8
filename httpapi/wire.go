package httpapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/scoring"
)

// messageIn is a message as a client sends it.
type messageIn struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Name       string            `json:"name"`
	ToolCallID string            `json:"tool_call_id"`
	ToolCalls  []memory.ToolCall `json:"tool_calls"`
	Important  bool              `json:"important"`
	Pinned     bool              `json:"pinned"`
	Metadata   map[string]any    `json:"metadata"`
	CreatedAt  string            `json:"created_at"`
	// MessageID is the client's own id: a message whose id the session
	// holds already is not stored again.
	MessageID string `json:"message_id"`
}

func (in *messageIn) toMessage(i int) (*memory.Message, error) {
	created, err := memory.ParseTime("created_at", in.CreatedAt)
	if err != nil {
		return nil, memory.Errorf(memory.EINVALID, "messages[%d].%s", i, memory.ErrorMessage(err))
	}
	md, err := metadataIn(in.Metadata)
	if err != nil {
		return nil, memory.Errorf(memory.EINVALID, "messages[%d].metadata: %v", i, err)
	}
	return &memory.Message{
		Role: memory.Role(in.Role), Content: in.Content, Name: in.Name, ToolCallID: in.ToolCallID,
		ToolCalls: in.ToolCalls, Important: in.Important, Pinned: in.Pinned, Metadata: md, CreatedAt: created,
		ClientID: in.MessageID,
	}, nil
}

// metadataIn converts decoded numbers to Go numbers; other value checks are
// the domain's.
func metadataIn(md map[string]any) (map[string]any, error) {
	for k, v := range md {
		if n, ok := v.(json.Number); ok {
			x, err := numberValue(n)
			if err != nil {
				return nil, err
			}
			md[k] = x
		}
	}
	return md, nil
}

// messageOut is a message as the server returns it.
type messageOut struct {
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

func toMessageOut(m *memory.Message) messageOut {
	md := m.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return messageOut{
		ID: m.ID, SessionID: m.SessionID, Role: m.Role, Content: m.Content, Name: m.Name,
		ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls, Important: m.Important, Pinned: m.Pinned,
		Metadata: md, CreatedAt: m.CreatedAt, Tokens: m.Tokens, State: m.State, Kind: m.Kind, Sources: m.Sources,
		MessageID: m.ClientID, Versions: m.Versions, VersionOf: m.VersionOf,
	}
}

func toMessagesOut(msgs []*memory.Message) []messageOut {
	out := make([]messageOut, len(msgs))
	for i, m := range msgs {
		out[i] = toMessageOut(m)
	}
	return out
}

type sessionIn struct {
	ContextWindow *int           `json:"context_window"`
	Encoding      *string        `json:"encoding"`
	Metadata      map[string]any `json:"metadata"`
	memory.PolicyOverrides
	// Policy is the nested form the status shows (GET, then PUT back with
	// a change): the same names as the top-level overrides.
	Policy *memory.PolicyOverrides `json:"policy"`
}

// policy is the overrides of both forms. A field set in both with two
// values is refused: neither can be taken without ignoring the other.
func (in *sessionIn) policy() (memory.PolicyOverrides, error) {
	if in.Policy == nil {
		return in.PolicyOverrides, nil
	}
	var top, nested map[string]any
	if err := roundTrip(&in.PolicyOverrides, &top); err != nil {
		return memory.PolicyOverrides{}, err
	}
	if err := roundTrip(in.Policy, &nested); err != nil {
		return memory.PolicyOverrides{}, err
	}
	for _, k := range slices.Sorted(maps.Keys(nested)) {
		if v, ok := top[k]; ok && v != nested[k] {
			return memory.PolicyOverrides{}, memory.Errorf(memory.EINVALID,
				"%s is %v but policy.%s is %v: set it once", k, v, k, nested[k])
		}
	}
	return *in.PolicyOverrides.Merge(in.Policy), nil
}

func roundTrip(src, dst any) error {
	b, err := json.Marshal(src)
	if err != nil {
		return fmt.Errorf("encode policy: %w", err)
	}
	return json.Unmarshal(b, dst)
}

type compactIn struct {
	Prompt string `json:"prompt"`
	DryRun bool   `json:"dry_run"`
}

// coldChunkOut is a cold chunk as GET .../cold lists it.
type coldChunkOut struct {
	messageOut
	DropReason       string    `json:"drop_reason"`
	RelevanceScore   float64   `json:"relevance_score"`
	PromptAtDrop     string    `json:"prompt_at_drop"`
	RecoverableUntil time.Time `json:"recoverable_until"`
	DroppedAt        time.Time `json:"dropped_at"`
	SummaryID        string    `json:"summary_id,omitempty"`
}

func toColdOut(m *memory.Message) coldChunkOut {
	out := coldChunkOut{messageOut: toMessageOut(m)}
	if c := m.Cold; c != nil {
		out.DropReason, out.RelevanceScore, out.PromptAtDrop = c.DropReason, c.RelevanceScore, c.PromptAtDrop
		out.RecoverableUntil, out.DroppedAt, out.SummaryID = c.RecoverableUntil, c.DroppedAt, c.SummaryID
	}
	return out
}

type appendIn struct {
	Messages []messageIn `json:"messages"`
}

type appendOut struct {
	IDs        []string       `json:"ids"`
	Tokens     []int          `json:"tokens"`
	Session    *memory.Status `json:"session"`
	Compaction any            `json:"compaction"`
}

type searchIn struct {
	Query     string   `json:"query"`
	SessionID string   `json:"session_id"`
	Sessions  []string `json:"sessions"`
	K         int      `json:"k"`
	Mode      string   `json:"mode"`
	States    []string `json:"states"`
	Since     string   `json:"since"`
	Until     string   `json:"until"`
	Neighbors *int     `json:"neighbors"`
}

type searchResultOut struct {
	messageOut
	Score     float64 `json:"score"`
	Highlight string  `json:"highlight,omitempty"`
	Via       string  `json:"via,omitempty"`
}

type contextIn struct {
	Prompt string `json:"prompt"`
	// MaxTokens absent or null: the session's default. 0 is refused: it
	// read as "the default" while -1 was refused, so a client computing a
	// budget that came out 0 got a full window instead of an error.
	MaxTokens *int `json:"max_tokens"`
	Explain   bool `json:"explain"`
	// Format "openai" answers plain chat messages; "" or "ctxd" the full form.
	Format string `json:"format"`
}

// windowMessageOut is a message of the context window: sendable as is
// (role, content, name, tool_call_id, tool_calls) plus where it came from.
type windowMessageOut struct {
	messageOut
	Source     string              `json:"source"`
	Score      float64             `json:"score"`
	Components *scoring.Components `json:"components,omitempty"`
	PruneLevel int                 `json:"prune_level,omitempty"`
}

type contextOut struct {
	Messages   []windowMessageOut   `json:"messages"`
	Tokens     int                  `json:"tokens"`
	Recovered  []string             `json:"recovered"`
	AnswerOnly []string             `json:"answer_only,omitempty"`
	Budget     memory.ContextBudget `json:"budget"`
}
