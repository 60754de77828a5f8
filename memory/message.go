package memory

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Role is who wrote a message, in the OpenAI chat vocabulary.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Valid reports whether r is one of the four chat roles.
func (r Role) Valid() bool {
	switch r {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		return true
	}
	return false
}

// State is where a message stands with respect to the working window.
type State string

const (
	StateActive     State = "active"     // in the working window
	StateSummarized State = "summarized" // replaced by a summary; original kept cold
	StateDropped    State = "dropped"    // moved to cold storage
	StateRecovered  State = "recovered"  // brought back from cold storage into the window
)

// States lists every state in a stable order.
var States = []State{StateActive, StateSummarized, StateDropped, StateRecovered}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	switch s {
	case StateActive, StateSummarized, StateDropped, StateRecovered:
		return true
	}
	return false
}

// InWindow reports whether a message in state s counts toward the working window.
func (s State) InWindow() bool { return s == StateActive || s == StateRecovered }

// Kinds of messages the server writes itself.
const (
	// KindSummary marks a message the server wrote to replace others.
	KindSummary = "summary"
	// KindVersion marks an earlier version of an edited message, kept cold
	// (drop reason "edited") so it stays searchable and can be read back;
	// VersionOf names the message it was a version of.
	KindVersion = "version"
)

// KindDigest marks a message a window carries that is not stored: the
// lines of older tool outputs that name files and identifiers, written for
// that window (its sources are the outputs the lines come from).
const KindDigest = "digest"

// ToolCall is an assistant's request to call a tool, in the OpenAI shape.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function a ToolCall invokes and its JSON arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one stored chat message. The JSON tags are the API's field names,
// so the same value serves the store, the export format and the wire.
type Message struct {
	ID         string         `json:"id"`
	Tenant     string         `json:"tenant,omitempty"`
	SessionID  string         `json:"session_id"`
	Seq        uint64         `json:"seq"`
	Role       Role           `json:"role"`
	Content    string         `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	ToolCalls  []ToolCall     `json:"tool_calls,omitempty"`
	Important  bool           `json:"important"`
	Pinned     bool           `json:"pinned"`
	Metadata   map[string]any `json:"metadata,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	Tokens     int            `json:"tokens"`
	State      State          `json:"state"`
	Kind       string         `json:"kind,omitempty"`
	Sources    []string       `json:"sources,omitempty"`
	Cold       *ColdInfo      `json:"cold,omitempty"`
	// Anchor is where a summary sits in the window: the seq of its first
	// source. Other messages sit at their own Seq.
	Anchor uint64 `json:"anchor,omitempty"`
	// Turn is how many assistant messages the session had before this one;
	// tool output is pruned by how many assistant turns followed it.
	Turn int `json:"turn"`
	// Prune holds the window costs of a long tool result's pruned forms.
	Prune *PruneCosts `json:"prune,omitempty"`
	// ClientID is the client's own id for the message (message_id on the
	// wire): a retried write that names it again is not stored twice.
	ClientID string `json:"message_id,omitempty"`
	// Versions lists the ids of this message's earlier versions (kept
	// cold when its content was edited), oldest first.
	Versions []string `json:"versions,omitempty"`
	// VersionOf is, on an earlier version (KindVersion), the id of the
	// message it is a version of.
	VersionOf string `json:"version_of,omitempty"`

	// Vector is the message's embedding. It is stored apart from the record
	// (it is large and most reads do not need it).
	Vector []float32 `json:"-"`
}

// Position orders messages in the window.
func (m *Message) Position() uint64 {
	if m.Anchor != 0 {
		return m.Anchor
	}
	return m.Seq
}

// IsSummary reports whether m was written by the server to replace others.
func (m *Message) IsSummary() bool { return m.Kind == KindSummary }

// TurnSystemKey marks, in a system message's metadata, one that stands at
// its place in the conversation (a system message a client sends between
// its turns, as Claude Code does on every call) rather than with the
// system prompt: it keeps its role, and is otherwise kept, ranked and
// compacted as the turns around it are, not pinned into every window.
const TurnSystemKey = "ctxd_turn_system"

// IsTurnSystem reports whether m is a system message of a turn (TurnSystemKey).
func (m *Message) IsTurnSystem() bool {
	return m.Role == RoleSystem && m.Metadata[TurnSystemKey] == true
}

// IsStandingSystem reports whether m is a system message that is in every
// window and counts as pinned: a system message, not a summary's or a turn's.
func (m *Message) IsStandingSystem() bool {
	return m.Role == RoleSystem && !m.IsSummary() && !m.IsTurnSystem()
}

// IsVersion reports whether m is an earlier version of an edited message.
// It is kept for reading and search, never brought back into a window on
// its own: its correction stands in the window in its place.
func (m *Message) IsVersion() bool { return m.Kind == KindVersion }

// InWindow reports whether m costs tokens in the working window now.
func (m *Message) InWindow() bool { return m.State.InWindow() }

// Limits bound what one request may carry.
type Limits struct {
	MaxMessagesPerCall int // messages in one POST
	MaxContentBytes    int // bytes of content in one message
	MaxMetadataKeys    int
	MaxMetadataBytes   int // bytes of one message's metadata, encoded
}

// DefaultLimits are the limits of API.md.
var DefaultLimits = Limits{
	MaxMessagesPerCall: 1000,
	MaxContentBytes:    1 << 20,
	MaxMetadataKeys:    64,
	MaxMetadataBytes:   16 << 10,
}

// Validate checks a message as a client sent it. It returns an *Error with
// EINVALID or ETOOLARGE naming the field that is wrong; i is the message's
// position in the request, for the message text.
func (m *Message) Validate(i int, lim Limits) error {
	if !m.Role.Valid() {
		return Errorf(EINVALID, "messages[%d].role: %q is not one of system, user, assistant, tool", i, m.Role)
	}
	if err := checkContent(m, lim); err != nil {
		return Errorf(ErrorCode(err), "messages[%d].%s", i, ErrorMessage(err))
	}
	if len(m.ClientID) > MaxClientIDBytes {
		return Errorf(EINVALID, "messages[%d].message_id: longer than %d bytes", i, MaxClientIDBytes)
	}
	// No map or joined strings here: the gateway validates every message
	// of a resent history on every call, and what this allocated per
	// message grew each call's garbage with the history.
	for _, f := range [...]struct{ field, s string }{{"name", m.Name}, {"tool_call_id", m.ToolCallID}, {"message_id", m.ClientID}} {
		if err := checkText(f.s); err != nil {
			return Errorf(EINVALID, "messages[%d].%s: %v", i, f.field, err)
		}
	}
	if len(m.Name) > 256 {
		return Errorf(EINVALID, "messages[%d].name: longer than 256 bytes", i)
	}
	if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
		return Errorf(EINVALID, "messages[%d].tool_calls: only assistant messages may call tools", i)
	}
	var callIDs map[string]bool // for a message of many calls; a few are compared in place
	if len(m.ToolCalls) > 8 {
		callIDs = make(map[string]bool, len(m.ToolCalls))
	}
	for j, tc := range m.ToolCalls {
		// A call id names one call: a result answering it would answer two,
		// and every window after would carry both.
		seen := callIDs[tc.ID]
		if callIDs == nil {
			seen = slices.ContainsFunc(m.ToolCalls[:j], func(o ToolCall) bool { return o.ID == tc.ID })
		} else {
			callIDs[tc.ID] = true
		}
		if tc.ID != "" && seen {
			return Errorf(EINVALID, "messages[%d].tool_calls[%d].id: %q names an earlier call of this message too; give each call its own id", i, j, tc.ID)
		}
		if tc.Function.Name == "" {
			return Errorf(EINVALID, "messages[%d].tool_calls[%d].function.name: required", i, j)
		}
		for _, s := range [...]string{tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments} {
			if err := checkText(s); err != nil {
				return Errorf(EINVALID, "messages[%d].tool_calls[%d]: %v", i, j, err)
			}
		}
	}
	if m.ToolCallID != "" && m.Role != RoleTool {
		return Errorf(EINVALID, "messages[%d].tool_call_id: only tool messages answer a tool call", i)
	}
	if err := checkCreatedAt(m.CreatedAt); err != nil {
		return Errorf(EINVALID, "messages[%d].created_at: %v", i, err)
	}
	return validateMetadata(m.Metadata, i, lim)
}

// MaxClientIDBytes bounds a client's message_id.
const MaxClientIDBytes = 256

// checkContent checks m's content for its role: EINVALID or ETOOLARGE, the
// message starting with "content". Only a tool result (a command that
// printed nothing) and an assistant message with tool_calls may be empty.
func checkContent(m *Message, lim Limits) error {
	if len(m.Content) > lim.MaxContentBytes {
		return Errorf(ETOOLARGE, "content: %d bytes is over the limit of %d", len(m.Content), lim.MaxContentBytes)
	}
	if strings.TrimSpace(m.Content) == "" && m.Role != RoleTool && (m.Role != RoleAssistant || len(m.ToolCalls) == 0) {
		return Errorf(EINVALID, "content: must not be empty (only a tool result, or an assistant message with tool_calls, may have none)")
	}
	if err := checkText(m.Content); err != nil {
		return Errorf(EINVALID, "content: %v", err)
	}
	return nil
}

// checkCreatedAt refuses a time that is stored in UTC outside the years
// 0000-9999: JSON (and RFC 3339) cannot write it, so the store could not
// encode the message ("9999-12-31T23:59:59-23:59" is year 10000 in UTC). An
// offset of 24 hours or more is not RFC 3339, though Go parses it.
func checkCreatedAt(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		return fmt.Errorf("offset %s is not a valid RFC 3339 offset", t.Format("-07:00"))
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%s is year %d in UTC, outside 0000..9999", t.Format(time.RFC3339), y)
	}
	return nil
}

// checkText refuses text a JSON client could not have meant: invalid UTF-8
// (Go's decoder would silently replace it) and NUL bytes.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("contains a NUL character")
	}
	return nil
}

func validateMetadata(md map[string]any, i int, lim Limits) error {
	if err := checkMetadata(md, lim); err != nil {
		return Errorf(ErrorCode(err), "messages[%d].%s", i, ErrorMessage(err))
	}
	return nil
}

// checkMetadata checks md's values and its size against lim: EINVALID or
// ETOOLARGE, the message starting with "metadata".
func checkMetadata(md map[string]any, lim Limits) error {
	if len(md) > lim.MaxMetadataKeys {
		return Errorf(EINVALID, "metadata: %d keys is over the limit of %d", len(md), lim.MaxMetadataKeys)
	}
	if err := ValidateMetadata(md); err != nil {
		return Errorf(EINVALID, "%v", err)
	}
	if b, _ := json.Marshal(md); len(b) > lim.MaxMetadataBytes {
		return Errorf(ETOOLARGE, "metadata: %d bytes is over the limit of %d", len(b), lim.MaxMetadataBytes)
	}
	return nil
}

// ValidateMetadata checks that every value is a string, a finite number or a bool.
func ValidateMetadata(md map[string]any) error {
	for k, v := range md {
		if k == "" || checkText(k) != nil {
			return fmt.Errorf("metadata: key %q is not a valid name", k)
		}
		switch x := v.(type) {
		case string:
			if err := checkText(x); err != nil {
				return fmt.Errorf("metadata.%s: %v", k, err)
			}
		case bool, json.Number, int, int64:
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("metadata.%s: not a finite number", k)
			}
		default:
			return fmt.Errorf("metadata.%s: values must be strings, numbers or booleans, not %T", k, v)
		}
	}
	return nil
}
