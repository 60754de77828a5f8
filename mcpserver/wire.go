package mcpserver

import (
	"time"

	"github.com/ctxd/ctxd/memory"
)

// The tools' answers use the API's field names (API.md), so an agent that
// has seen one sees the other. Lists are never null: the output schemas say
// array, and the SDK checks every answer against its schema.

// Message is a stored message as the tools return it.
type Message struct {
	ID         string            `json:"id" jsonschema:"the message's id: pass it to memory_get or memory_recover"`
	SessionID  string            `json:"session_id" jsonschema:"the session that holds it"`
	Role       string            `json:"role" jsonschema:"system, user, assistant or tool"`
	Content    string            `json:"content"`
	Name       string            `json:"name,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
	ToolCalls  []memory.ToolCall `json:"tool_calls,omitempty"`
	State      string            `json:"state" jsonschema:"active or recovered (in the session's window), summarized or dropped (cold: compacted out of the window; memory_recover brings it back)"`
	Pinned     bool              `json:"pinned,omitempty"`
	Important  bool              `json:"important,omitempty"`
	Tokens     int               `json:"tokens" jsonschema:"what the message costs in the session's window"`
	Kind       string            `json:"kind,omitempty" jsonschema:"summary for a summary the server wrote; its sources are the messages it replaced"`
	Sources    []string          `json:"sources,omitempty"`
	Metadata   map[string]any    `json:"metadata,omitempty"`
	CreatedAt  string            `json:"created_at" jsonschema:"RFC 3339"`
}

func toMessage(m *memory.Message) Message {
	return Message{ID: m.ID, SessionID: m.SessionID, Role: string(m.Role), Content: m.Content, Name: m.Name,
		ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls, State: string(m.State), Pinned: m.Pinned,
		Important: m.Important, Tokens: m.Tokens, Kind: m.Kind, Sources: m.Sources, Metadata: m.Metadata,
		CreatedAt: m.CreatedAt.UTC().Format(time.RFC3339Nano)}
}

// SearchResult is one found message.
type SearchResult struct {
	Message
	Score     float64 `json:"score" jsonschema:"relevance, higher is better"`
	Highlight string  `json:"highlight,omitempty" jsonschema:"the matching passage, when the content is long"`
}

// SearchOutput is memory_search's answer.
type SearchOutput struct {
	Results []SearchResult `json:"results" jsonschema:"best first; empty when nothing matches"`
}

// WindowMessage is a message of a context window.
type WindowMessage struct {
	Message
	Source string  `json:"source" jsonschema:"why it is in the window: pinned, summary, recovered (brought back from cold storage for this prompt), recent or working"`
	Score  float64 `json:"score"`
}

// ContextOutput is memory_context's answer.
type ContextOutput struct {
	Messages  []WindowMessage `json:"messages" jsonschema:"the window in chronological order, ready to send to a chat model"`
	Tokens    int             `json:"tokens" jsonschema:"what the window costs"`
	Recovered []string        `json:"recovered" jsonschema:"ids of cold messages this call moved back into the session's window"`
	MaxTokens int             `json:"max_tokens" jsonschema:"the budget the window was built for"`
}

// SaveOutput is memory_save's answer.
type SaveOutput struct {
	ID      string        `json:"id" jsonschema:"the note's id"`
	Tokens  int           `json:"tokens" jsonschema:"what the note costs in the session's window"`
	Session SessionStatus `json:"session" jsonschema:"the session after the write"`
}

// Counts is how many messages of a session are in each state.
type Counts struct {
	Active     int `json:"active"`
	Summarized int `json:"summarized"`
	Dropped    int `json:"dropped"`
	Recovered  int `json:"recovered"`
}

// SessionStatus is session_status's answer (and a session resource).
type SessionStatus struct {
	ID            string  `json:"id"`
	Tokens        int     `json:"tokens" jsonschema:"what the session's working window costs now"`
	ContextWindow int     `json:"context_window" jsonschema:"the session's context window in tokens"`
	PctUsed       float64 `json:"pct_used" jsonschema:"tokens over context_window, 0 to 1"`
	State         string  `json:"state" jsonschema:"ok; flush_due (save durable notes now: compaction comes next; said once per compaction cycle, with flush_prompt); compaction_due; over_limit"`
	FlushPrompt   string  `json:"flush_prompt,omitempty" jsonschema:"present when state is flush_due: what to do before context is lost"`
	NoteRoom      *int    `json:"note_room_tokens,omitempty" jsonschema:"with flush_prompt: the tokens of pinned notes the session can still take"`
	FlushDue      bool    `json:"flush_due" jsonschema:"true when the agent should save durable notes with memory_save before the session is compacted"`
	Messages      Counts  `json:"messages" jsonschema:"how many messages are in each state"`
	Summaries     int     `json:"summaries"`
	Compactions   int     `json:"compactions"`
	CreatedAt     string  `json:"created_at" jsonschema:"RFC 3339"`
	UpdatedAt     string  `json:"updated_at" jsonschema:"RFC 3339"`
}

func toStatus(st *memory.Status) SessionStatus {
	if st == nil {
		return SessionStatus{}
	}
	c := st.Messages
	return SessionStatus{ID: st.ID, Tokens: st.Tokens, ContextWindow: st.ContextWindow, PctUsed: st.PctUsed,
		State: st.State, FlushPrompt: st.FlushPrompt, NoteRoom: st.NoteRoom, FlushDue: st.FlushPrompt != "",
		Messages:  Counts{Active: c.Active, Summarized: c.Summarized, Dropped: c.Dropped, Recovered: c.Recovered},
		Summaries: st.Summaries, Compactions: st.Compactions,
		CreatedAt: st.CreatedAt.UTC().Format(time.RFC3339Nano), UpdatedAt: st.UpdatedAt.UTC().Format(time.RFC3339Nano)}
}
