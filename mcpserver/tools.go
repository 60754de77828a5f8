package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/ctxd/ctxd/memory"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names.
const (
	ToolSearch  = "memory_search"
	ToolSave    = "memory_save"
	ToolContext = "memory_context"
	ToolRecover = "memory_recover"
	ToolGet     = "memory_get"
	ToolStatus  = "session_status"
)

// tools holds the handlers of one server: they share its backend.
type tools struct {
	b   Backend
	log *slog.Logger
}

type searchIn struct {
	Query   string `json:"query" jsonschema:"what to look for: words, names, a question or a description of what was said"`
	Session string `json:"session,omitempty" jsonschema:"search only this session; omit to search every session you can see"`
	K       int    `json:"k,omitempty" jsonschema:"how many results to return (default 10)"`
	Mode    string `json:"mode,omitempty" jsonschema:"hybrid (the default: words and meaning); text (exact words, names, codes, ids); vector (meaning only, for paraphrases)"`
}

type saveIn struct {
	Session   string         `json:"session" jsonschema:"the session to save the note into (created if new)"`
	Content   string         `json:"content" jsonschema:"the note: one fact, decision, preference or open task, written to be understood on its own later"`
	Pinned    *bool          `json:"pinned,omitempty" jsonschema:"keep the note in every window of the session, never compacted (default true); pinned notes share a budget of the session's window"`
	Important bool           `json:"important,omitempty" jsonschema:"raise the note's relevance and protect it from being dropped, without pinning it"`
	Role      string         `json:"role,omitempty" jsonschema:"who the note speaks as: system (the default for a pinned note), assistant (the default otherwise) or user"`
	Metadata  map[string]any `json:"metadata,omitempty" jsonschema:"optional labels stored with the note: string, number or boolean values"`
}

type contextIn struct {
	Session   string `json:"session" jsonschema:"the session whose window to build"`
	Prompt    string `json:"prompt,omitempty" jsonschema:"the next user prompt: cold messages relevant to it are recovered into the window"`
	MaxTokens *int   `json:"max_tokens,omitempty" jsonschema:"the window's budget, a positive number of tokens; omit for the session's context window minus its reserve"`
}

type recoverIn struct {
	ID      string `json:"id" jsonschema:"the cold message's id (state summarized or dropped), from memory_search or memory_get"`
	Session string `json:"session,omitempty" jsonschema:"the session that holds it; omit to use the message's own"`
}

type getIn struct {
	ID string `json:"id" jsonschema:"the message's id, from memory_search, memory_context or an earlier answer"`
}

type statusIn struct {
	Session string `json:"session" jsonschema:"the session to report on"`
}

// add registers every tool on s.
func (t *tools) add(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: ToolSearch, Title: "Search memory", InputSchema: schemas.search,
		Description: "Search your stored conversation memory: every session you can see, or one session. " +
			"Use it to find what was said, decided or done before, including messages compacted out of a session's window. " +
			"Returns matching messages, best first, each with its id, session_id, role, content, state and score; " +
			"a message in state summarized or dropped can be brought back with memory_recover.",
		Annotations: readOnly}, t.search)
	mcp.AddTool(s, &mcp.Tool{Name: ToolSave, Title: "Save a note", InputSchema: schemas.save,
		Description: "Save a durable note (a fact, decision, preference or open task) into a session so it survives compaction. " +
			"A pinned note (the default) stays in every window of the session; an important one is kept and ranked higher but may leave the window. " +
			"Call it once per note, and whenever session_status shows a flush_prompt. " +
			"Returns the note's id and tokens and the session's status after the write.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)}}, t.save)
	mcp.AddTool(s, &mcp.Tool{Name: ToolContext, Title: "Build the context window", InputSchema: schemas.context,
		Description: "Build the best window of a session's messages for the next prompt within a token budget: pinned notes, summaries, the recent turns, " +
			"and cold messages relevant to the prompt, which this call recovers into the session's window. " +
			"Use it to rebuild your context after a restart or when your own context is full. " +
			"Returns the messages in chronological order with why each is there, their total tokens and the ids recovered.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), IdempotentHint: true, OpenWorldHint: new(false)}}, t.context)
	mcp.AddTool(s, &mcp.Tool{Name: ToolRecover, Title: "Recover a message", InputSchema: schemas.recover,
		Description: "Bring a cold message (state summarized or dropped: compacted out of its session's window) back into the window, by id. " +
			"Use it when a search found an old message you need in the conversation again. Recovering twice is not an error. " +
			"Returns the message, now in state recovered.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), IdempotentHint: true, OpenWorldHint: new(false)}}, t.recover)
	mcp.AddTool(s, &mcp.Tool{Name: ToolGet, Title: "Read a message", InputSchema: schemas.get,
		Description: "Read one stored message by id, whatever its session or state, with its full content. " +
			"Use it to follow an id from a search result, a summary's sources or a note.",
		Annotations: readOnly}, t.get)
	mcp.AddTool(s, &mcp.Tool{Name: ToolStatus, Title: "Session status", InputSchema: schemas.status,
		Description: "Report a session's memory health: tokens used against its context window, its state " +
			"(ok, flush_due, compaction_due, over_limit), and message counts. When flush_due is true, save the durable facts " +
			"you still need with memory_save before the session is compacted (the flush_prompt says so).",
		Annotations: readOnly}, t.status)
}

var readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}

func (t *tools) fail(ctx context.Context, tool string, err error) error {
	return toolError(ctx, t.log, tool, err)
}

func (t *tools) search(ctx context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, SearchOutput, error) {
	req := memory.SearchRequest{Query: in.Query, K: in.K, Mode: in.Mode}
	if in.Session != "" {
		req.Sessions = []string{in.Session}
	}
	// Validated here as well as by the backend: a client backend must not
	// send an unchecked id, and the error reads the same either way.
	if err := req.Validate(); err != nil {
		return nil, SearchOutput{}, t.fail(ctx, ToolSearch, err)
	}
	res, err := t.b.Search(ctx, req)
	if err != nil {
		return nil, SearchOutput{}, t.fail(ctx, ToolSearch, err)
	}
	out := SearchOutput{Results: make([]SearchResult, len(res))}
	for i, r := range res {
		out.Results[i] = SearchResult{Message: toMessage(r.Message), Score: r.Score, Highlight: r.Highlight}
	}
	return nil, out, nil
}

func (t *tools) save(ctx context.Context, _ *mcp.CallToolRequest, in saveIn) (*mcp.CallToolResult, SaveOutput, error) {
	if err := memory.ValidateSessionID(in.Session); err != nil {
		return nil, SaveOutput{}, t.fail(ctx, ToolSave, err)
	}
	pinned := in.Pinned == nil || *in.Pinned
	if !pinned && !in.Important {
		return nil, SaveOutput{}, t.fail(ctx, ToolSave, memory.Errorf(memory.EINVALID,
			"pinned: a note is pinned or important; set important to true to save it unpinned"))
	}
	role := memory.Role(in.Role)
	switch {
	case role == "" && pinned:
		// As the gateway saves the notes of a flush turn: a system note
		// reads as standing context in any chat API.
		role = memory.RoleSystem
	case role == "":
		role = memory.RoleAssistant
	case role == memory.RoleTool || !role.Valid():
		return nil, SaveOutput{}, t.fail(ctx, ToolSave, memory.Errorf(memory.EINVALID,
			"role: %q is not one of system, assistant, user", in.Role))
	}
	m := &memory.Message{Role: role, Content: in.Content, Pinned: pinned, Important: in.Important, Metadata: in.Metadata}
	res, err := t.b.Append(ctx, in.Session, []*memory.Message{m})
	var e *memory.Error
	if errors.As(err, &e) {
		// The domain names the note as the first of a batch of messages.
		err = &memory.Error{Code: e.Code, Message: strings.TrimPrefix(e.Message, "messages[0].")}
	}
	if err != nil {
		return nil, SaveOutput{}, t.fail(ctx, ToolSave, err)
	}
	if len(res.IDs) != 1 || len(res.Tokens) != 1 {
		return nil, SaveOutput{}, t.fail(ctx, ToolSave, memory.Errorf(memory.EINTERNAL, "stored %d ids for one note", len(res.IDs)))
	}
	return nil, SaveOutput{ID: res.IDs[0], Tokens: res.Tokens[0], Session: toStatus(res.Session)}, nil
}

func (t *tools) context(ctx context.Context, _ *mcp.CallToolRequest, in contextIn) (*mcp.CallToolResult, ContextOutput, error) {
	if err := memory.ValidateSessionID(in.Session); err != nil {
		return nil, ContextOutput{}, t.fail(ctx, ToolContext, err)
	}
	req := memory.ContextRequest{Prompt: in.Prompt}
	if in.MaxTokens != nil {
		// As over HTTP: 0 is refused rather than read as "the default", so
		// a budget computed as 0 is not answered with a full window.
		if *in.MaxTokens <= 0 {
			return nil, ContextOutput{}, t.fail(ctx, ToolContext, memory.Errorf(memory.EINVALID,
				"max_tokens: %d is not a budget; omit max_tokens for the session's default, its context_window minus its reserve", *in.MaxTokens))
		}
		req.MaxTokens = *in.MaxTokens
	}
	res, err := t.b.Context(ctx, in.Session, req)
	if err != nil {
		return nil, ContextOutput{}, t.fail(ctx, ToolContext, err)
	}
	out := ContextOutput{Messages: make([]WindowMessage, len(res.Messages)), Tokens: res.Tokens,
		Recovered: append([]string{}, res.Recovered...), MaxTokens: res.Budget.MaxTokens}
	for i, m := range res.Messages {
		out.Messages[i] = WindowMessage{Message: toMessage(m.Message), Source: m.Source, Score: m.Score}
	}
	return nil, out, nil
}

func (t *tools) recover(ctx context.Context, _ *mcp.CallToolRequest, in recoverIn) (*mcp.CallToolResult, Message, error) {
	if err := checkID(in.ID); err != nil {
		return nil, Message{}, t.fail(ctx, ToolRecover, err)
	}
	session := in.Session
	if session == "" {
		m, err := t.b.Message(ctx, in.ID)
		if err != nil {
			return nil, Message{}, t.fail(ctx, ToolRecover, err)
		}
		session = m.SessionID
	}
	if err := memory.ValidateSessionID(session); err != nil {
		return nil, Message{}, t.fail(ctx, ToolRecover, err)
	}
	m, err := t.b.Recover(ctx, session, in.ID)
	if err != nil {
		return nil, Message{}, t.fail(ctx, ToolRecover, err)
	}
	return nil, toMessage(m), nil
}

func (t *tools) get(ctx context.Context, _ *mcp.CallToolRequest, in getIn) (*mcp.CallToolResult, Message, error) {
	if err := checkID(in.ID); err != nil {
		return nil, Message{}, t.fail(ctx, ToolGet, err)
	}
	m, err := t.b.Message(ctx, in.ID)
	if err != nil {
		return nil, Message{}, t.fail(ctx, ToolGet, err)
	}
	return nil, toMessage(m), nil
}

func (t *tools) status(ctx context.Context, _ *mcp.CallToolRequest, in statusIn) (*mcp.CallToolResult, SessionStatus, error) {
	if err := memory.ValidateSessionID(in.Session); err != nil {
		return nil, SessionStatus{}, t.fail(ctx, ToolStatus, err)
	}
	st, err := t.b.Session(ctx, in.Session)
	if err != nil {
		return nil, SessionStatus{}, t.fail(ctx, ToolStatus, err)
	}
	return nil, toStatus(st), nil
}

// checkID refuses an empty message id before it reaches a backend (a
// client backend would put it in a URL path).
func checkID(id string) error {
	if id == "" {
		return memory.Errorf(memory.EINVALID, "id: must not be empty; pass a message id from memory_search or memory_context")
	}
	return nil
}
