package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

// POST /v1/messages in the Anthropic Messages format. A client message
// becomes one or more ctxd messages: an assistant's text and tool_use
// blocks one assistant message with tool calls (the input's JSON with
// sorted keys, so a resent call compares equal), a user's tool_result
// blocks one tool message each and the rest of its blocks one user message.
//
// A system message inside messages (a mid-conversation system message:
// instructions placed after a user turn, which Claude Code sends on every
// call) is stored where it stands, as a system message marked
// memory.TurnSystemKey: it belongs to that point of the conversation, not to
// the system prompt (moving it there would change the cached prefix), and
// the window keeps or compacts it as it does the turns around it. (Sessions
// stored before kept it as a user message with the same mark.) The API takes one only
// right after a user turn; a window that has dropped that turn gets it
// back as a user turn of its own (see placeSystemTurns).

type anthropicRequest struct {
	Model     string            `json:"model"`
	Messages  []json.RawMessage `json:"messages"`
	System    json.RawMessage   `json:"system"`
	MaxTokens int               `json:"max_tokens"`
	Stream    bool              `json:"stream"`
	Tools     json.RawMessage   `json:"tools"`
	Metadata  struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

// anthropicVersion is sent when the caller names none.
const anthropicVersion = "2023-06-01"

func (s *Server) anthropicMessages(c echo.Context) error {
	var req anthropicRequest
	raw, messages, rep, err := decodeModelCall(c, &req, "messages", &s.lists)
	if err != nil {
		return err
	}
	req.Messages = messages
	f := &anthropicFormat{raw: raw, messages: req.Messages, parts: make([]int, len(req.Messages)), thinking: make([]bool, len(req.Messages))}
	var history []*memory.Message
	system, firstUser := "", ""
	if len(bytes.TrimSpace(req.System)) > 0 && string(req.System) != "null" {
		if system, err = textOf(req.System); err != nil {
			return memory.Errorf(memory.EINVALID, "system: %v", err)
		}
		history = append(history, &memory.Message{Role: memory.RoleSystem, Content: system})
		f.origin = append(f.origin, -1)
	}
	upTo := 0 // history[:upTo] is the list's repeated elements (and the system prompt)
	decoded := make([]*decodedMessage, len(req.Messages))
	repeated := rep.decoded()
	for i, rm := range req.Messages {
		d := (*decodedMessage)(nil)
		if i < len(repeated) {
			d = repeated[i] // sent before, byte for byte, and read then
		} else if d, err = s.anthropicMessage(i, rm); err != nil {
			return err
		}
		decoded[i] = d
		msgs := d.msgs
		f.thinking[i] = d.thinking
		for _, m := range msgs {
			if m.Role == memory.RoleUser && firstUser == "" && m.Metadata[turnSystemKey] != true {
				firstUser = m.Content
			}
			history = append(history, m)
			f.origin = append(f.origin, i)
		}
		f.parts[i] = len(msgs)
		if i < rep.k {
			upTo = len(history)
		}
	}
	rep.keep(decoded)
	window, err := contextWindow(c, req.Model)
	if err != nil {
		return err
	}
	tools := toolsOf(req.Tools)
	call := gatewayCall{
		req: memory.GatewayRequest{
			Session: anthropicSession(c.Request().Header, req.Metadata.UserID, system, firstUser),
			History: history, ContextWindow: window, Reserve: answerReserve(req.MaxTokens, window), Tools: tools,
			Repeat: rep.history(history, upTo),
		},
		format:   f,
		upstream: s.opts.Gateway.Anthropic,
		stream:   req.Stream,
	}
	return s.serveGateway(c, call)
}

// anthropicMessage reads client message i: from what it decoded to when
// the client sent it before (see decodedCache), else decoded.
func (s *Server) anthropicMessage(i int, rm json.RawMessage) (*decodedMessage, error) {
	if d, ok := s.decodedAnthropic.get(rm); ok {
		return d, nil
	}
	var am anthropicMessage
	if err := json.Unmarshal(rm, &am); err != nil {
		return nil, memory.Errorf(memory.EINVALID, "messages[%d]: %v", i, err)
	}
	blocks, err := anthropicBlocks(am.Content)
	if err != nil {
		return nil, memory.Errorf(memory.EINVALID, "messages[%d].content: %v", i, err)
	}
	msgs, err := fromAnthropic(am.Role, blocks)
	if err != nil {
		return nil, memory.Errorf(memory.EINVALID, "messages[%d]: %v", i, err)
	}
	d := &decodedMessage{msgs: msgs}
	for _, b := range blocks {
		d.thinking = d.thinking || b.Type == "thinking" || b.Type == "redacted_thinking"
	}
	s.decodedAnthropic.put(rm, msgs, d.thinking)
	return d, nil
}

// claudeCodeSessionHeader is the session id Claude Code sends on every
// call of one CLI session: its main conversation, subagents and side calls.
const claudeCodeSessionHeader = "X-Claude-Code-Session-Id"

// anthropicSession names the session of a Messages call: X-Ctxd-Session
// as it is; else Claude Code's session id told apart by the
// conversation's identity; else as GatewaySessionID (metadata.user_id).
func anthropicSession(h http.Header, userID, system, firstUser string) string {
	switch {
	case h.Get(SessionHeader) != "":
		return h.Get(SessionHeader)
	case h.Get(claudeCodeSessionHeader) != "":
		return memory.GatewayConversationID("cc-", h.Get(claudeCodeSessionHeader), system, firstUser)
	}
	return memory.GatewaySessionID("", userID, system, firstUser)
}

// anthropicBlocks reads a content field: a string is one text block.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	err := json.Unmarshal(raw, &blocks)
	return blocks, err
}

// fromAnthropic turns one Anthropic message into ctxd messages (see the
// top of the file).
func fromAnthropic(role string, blocks []anthropicBlock) ([]*memory.Message, error) {
	var texts []string
	switch role {
	case "assistant":
		m := &memory.Message{Role: memory.RoleAssistant}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_use", "server_tool_use":
				m.ToolCalls = append(m.ToolCalls, memory.ToolCall{ID: b.ID, Type: "function",
					Function: memory.FunctionCall{Name: b.Name, Arguments: canonicalJSON(b.Input)}})
			case "thinking", "redacted_thinking":
				// not stored: it goes back only in the client's own turn
			default:
				texts = append(texts, "["+b.Type+"]")
			}
		}
		m.Content = strings.Join(texts, "\n")
		if m.Content == "" && len(m.ToolCalls) == 0 {
			m.Content = "[empty]"
		}
		return []*memory.Message{m}, nil
	case "system":
		for _, b := range blocks {
			if b.Type != "text" {
				return nil, memory.Errorf(memory.EINVALID, "a system message holds text blocks only, not %q", b.Type)
			}
			texts = append(texts, b.Text)
		}
		text := strings.Join(texts, "\n")
		if text == "" {
			text = "[empty]"
		}
		return []*memory.Message{{Role: memory.RoleSystem, Content: text, Metadata: map[string]any{turnSystemKey: true}}}, nil
	case "user":
		var out []*memory.Message
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				text, err := textOf(b.Content)
				if err != nil {
					return nil, err
				}
				out = append(out, &memory.Message{Role: memory.RoleTool, ToolCallID: b.ToolUseID, Content: text})
			case "text":
				texts = append(texts, b.Text)
			default:
				texts = append(texts, "["+b.Type+"]")
			}
		}
		if len(texts) > 0 || len(out) == 0 {
			text := strings.Join(texts, "\n")
			if text == "" {
				text = "[empty]"
			}
			out = append(out, &memory.Message{Role: memory.RoleUser, Content: text})
		}
		return out, nil
	}
	return nil, memory.Errorf(memory.EINVALID, "role: %q is not one of user, assistant, system", role)
}

// turnSystemKey marks a system message the client sent inside messages
// (see the top of the file).
const turnSystemKey = memory.TurnSystemKey

// placeSystemTurns makes a window's mid-conversation system turns stand
// where the API takes them, right after a user turn: one whose user turn
// the window dropped becomes a user turn (its text, marked as the system's)
// merged with its neighbours, so the roles still alternate. at (each window
// message's turn and block) follows the turns as they move.
func placeSystemTurns(turns []anthropicTurn, at [][2]int) []anthropicTurn {
	var out []anthropicTurn
	moved := make([]int, len(turns)) // each old turn's index in out
	for i, t := range turns {
		if t.Role == "system" && (len(out) == 0 || out[len(out)-1].Role != "user") {
			t.Role = "user"
		}
		if n := len(out); n > 0 && out[n-1].Role == t.Role {
			for j := range at {
				if at[j][0] == i {
					at[j][1] += len(out[n-1].Content)
				}
			}
			out[n-1].Content = append(out[n-1].Content, t.Content...)
			moved[i] = n - 1
			continue
		}
		out = append(out, t)
		moved[i] = len(out) - 1
	}
	for j := range at {
		if at[j][0] >= 0 {
			at[j][0] = moved[at[j][0]]
		}
	}
	return out
}

// canonicalJSON rewrites a JSON value with sorted keys and no spaces, so a
// tool call's input compares equal however a client re-encodes it.
func canonicalJSON(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// anthropicFormat speaks Messages for one request.
type anthropicFormat struct {
	raw      map[string]json.RawMessage
	messages []json.RawMessage
	origin   []int  // for each history message, the client message it came from (-1: system)
	parts    []int  // for each client message, how many history messages it became
	thinking []bool // for each client message, whether it holds a thinking block
}

func (f *anthropicFormat) path() string { return "/v1/messages" }

func (f *anthropicFormat) auth(in, out http.Header, key string) {
	switch {
	case in.Get("X-Api-Key") != "":
		out.Set("X-Api-Key", in.Get("X-Api-Key"))
	case in.Get(echo.HeaderAuthorization) != "":
		out.Set(echo.HeaderAuthorization, in.Get(echo.HeaderAuthorization))
	case key != "":
		out.Set("X-Api-Key", key)
	}
	if out.Get("Anthropic-Version") == "" {
		out.Set("Anthropic-Version", anthropicVersion)
	}
}

type anthropicTurn struct {
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}

// body is the client's request with the window in place of its messages
// and system prompt. A client message whose every part is in the window as
// stored goes in the client's own form; the others are written from what
// ctxd stored, but for the final assistant turn, which goes whole when it
// holds a thinking block (the API requires it to start with one). Turns of
// one role in a row are merged (the API alternates user and assistant),
// and a window that starts with the assistant gets a user turn first. The
// client's system prompt goes as sent, ctxd's system messages (summaries,
// notes) as text blocks after it, so its cache_control breakpoints stay.
func (f *anthropicFormat) body(w *memory.GatewayWindow) ([]byte, error) {
	verbatim := map[int]int{}
	finalAssistant := -1
	for i, m := range w.Messages {
		if m.Client >= 0 && f.origin[m.Client] >= 0 {
			verbatim[f.origin[m.Client]]++
		}
		if m.Role == memory.RoleAssistant {
			finalAssistant = i
		}
	}

	var clientSystem bool
	var extra []json.RawMessage
	var turns []anthropicTurn
	// at is where each window message's last block went (turn, block;
	// turn -1: the system prompt): the cache breakpoint's place.
	at := make([][2]int, len(w.Messages))
	add := func(role string, blocks ...json.RawMessage) [2]int {
		if n := len(turns); n > 0 && turns[n-1].Role == role {
			// An assistant turn merged after another (a summary, which
			// is the assistant's) keeps its thinking blocks first: the
			// API wants the final assistant turn to start with one.
			k := 0
			for k < len(blocks) && !cacheable(blocks[k]) {
				k++
			}
			if k > 0 {
				for j := range at {
					if at[j][0] == n-1 {
						at[j][1] += k
					}
				}
				turns[n-1].Content = append(slices.Clone(blocks[:k]), turns[n-1].Content...)
				blocks = blocks[k:]
			}
			turns[n-1].Content = append(turns[n-1].Content, blocks...)
		} else {
			turns = append(turns, anthropicTurn{Role: role, Content: blocks})
		}
		return [2]int{len(turns) - 1, len(turns[len(turns)-1].Content) - 1}
	}
	done := map[int]bool{}
	for i, m := range w.Messages {
		at[i] = [2]int{-1, -1}
		if m.Role == memory.RoleSystem && !m.IsTurnSystem() {
			if m.Client >= 0 && f.origin[m.Client] == -1 {
				clientSystem = true
			} else {
				b, err := json.Marshal(anthropicBlock{Type: "text", Text: m.Content})
				if err != nil {
					return nil, err
				}
				extra = append(extra, b)
			}
			continue
		}
		if m.Client >= 0 && verbatim[f.origin[m.Client]] == f.parts[f.origin[m.Client]] {
			ci := f.origin[m.Client]
			if done[ci] {
				at[i] = at[i-1]
				continue
			}
			done[ci] = true
			var am anthropicMessage
			if err := json.Unmarshal(f.messages[ci], &am); err != nil {
				return nil, err
			}
			blocks, err := rawBlocks(am.Content)
			if err != nil {
				return nil, err
			}
			at[i] = add(am.Role, blocks...)
			continue
		}
		role, blocks, err := toAnthropic(m.Message)
		if err != nil {
			return nil, err
		}
		if i == finalAssistant && m.Origin >= 0 && f.origin[m.Origin] >= 0 && f.thinking[f.origin[m.Origin]] {
			// cut or pruned: its thinking blocks go first, as the client
			// sent them (signature and all), then what ctxd stored
			think, err := f.thinkingBlocks(f.origin[m.Origin])
			if err != nil {
				return nil, err
			}
			blocks = append(think, blocks...)
		}
		at[i] = add(role, blocks...)
	}
	turns = placeSystemTurns(turns, at)
	if len(turns) > 0 && turns[0].Role == "assistant" {
		b, _ := json.Marshal(anthropicBlock{Type: "text", Text: "[ctxd: earlier turns of this conversation are stored in ctxd]"})
		turns = append([]anthropicTurn{{Role: "user", Content: []json.RawMessage{b}}}, turns...)
		for i := range at {
			if at[i][0] >= 0 {
				at[i][0]++
			}
		}
	}
	out := make(map[string]json.RawMessage, len(f.raw))
	for k, v := range f.raw {
		out[k] = v
	}
	var system []json.RawMessage
	if clientSystem {
		var err error
		if system, err = rawBlocks(f.raw["system"]); err != nil {
			return nil, err
		}
	}
	switch {
	case len(system)+len(extra) == 0:
		delete(out, "system")
	case len(extra) > 0:
		b, err := json.Marshal(append(system, extra...))
		if err != nil {
			return nil, err
		}
		out["system"] = b
		system = append(system, extra...)
	}
	if err := f.placeBreakpoint(out, system, turns, w, at); err != nil {
		return nil, err
	}
	b, err := json.Marshal(turns)
	if err != nil {
		return nil, err
	}
	out["messages"] = b
	lowerAnswer(out, w, "max_tokens")
	return json.Marshal(out)
}

// thinkingBlocks are client message ci's thinking and redacted_thinking
// blocks, as sent.
func (f *anthropicFormat) thinkingBlocks(ci int) ([]json.RawMessage, error) {
	var am anthropicMessage
	if err := json.Unmarshal(f.messages[ci], &am); err != nil {
		return nil, err
	}
	blocks, err := rawBlocks(am.Content)
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for _, b := range blocks {
		var t struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(b, &t) == nil && (t.Type == "thinking" || t.Type == "redacted_thinking") {
			out = append(out, b)
		}
	}
	return out, nil
}

// rawBlocks splits a content field into its blocks, as sent.
func rawBlocks(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		b, err := json.Marshal(anthropicBlock{Type: "text", Text: s})
		return []json.RawMessage{b}, err
	}
	var blocks []json.RawMessage
	err := json.Unmarshal(raw, &blocks)
	return blocks, err
}

// toAnthropic writes a stored message (a summary, a digest, a pruned view
// or a part of a client message) as a turn's blocks.
func toAnthropic(m *memory.Message) (string, []json.RawMessage, error) {
	var blocks []anthropicBlock
	role := "user"
	switch m.Role {
	case memory.RoleTool:
		content, err := json.Marshal(m.Content)
		if err != nil {
			return "", nil, err
		}
		blocks = append(blocks, anthropicBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: content})
	case memory.RoleAssistant:
		role = "assistant"
		if m.Content != "" {
			blocks = append(blocks, anthropicBlock{Type: "text", Text: m.Content})
		}
		for _, tc := range m.ToolCalls {
			input := json.RawMessage(tc.Function.Arguments)
			if !json.Valid(input) {
				input = json.RawMessage("{}")
			}
			blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
		}
	default:
		if m.Metadata[turnSystemKey] == true {
			role = "system"
		}
		blocks = append(blocks, anthropicBlock{Type: "text", Text: m.Content})
	}
	out := make([]json.RawMessage, len(blocks))
	for i, b := range blocks {
		if b.Type == "text" && b.Text == "" {
			b.Text = "[empty]" // the API refuses empty text blocks
		}
		var err error
		if out[i], err = json.Marshal(b); err != nil {
			return "", nil, err
		}
	}
	return role, out, nil
}

// anthropicUsage is what a Messages answer says the prompt cost: the
// tokens read from and written to the prompt cache are part of it.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

func (u anthropicUsage) prompt() memory.PromptUsage {
	return memory.PromptUsage{Input: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		CacheRead: u.CacheReadInputTokens, CacheWrite: u.CacheCreationInputTokens}
}

func (f *anthropicFormat) answer(body []byte) (*memory.Message, memory.PromptUsage, error) {
	var a struct {
		Content []anthropicBlock `json:"content"`
		Usage   anthropicUsage   `json:"usage"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, memory.PromptUsage{}, err
	}
	msgs, err := fromAnthropic("assistant", a.Content)
	if err != nil {
		return nil, memory.PromptUsage{}, err
	}
	return msgs[0], a.Usage.prompt(), nil
}

func (f *anthropicFormat) stream() streamParser { return &anthropicStream{} }

// anthropicStream adds up the content blocks of a streamed message.
type anthropicStream struct {
	prompt memory.PromptUsage
	blocks []anthropicBlock
	inputs []string // a tool_use block's input, as it streams
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Message struct {
		Usage anthropicUsage `json:"usage"`
	} `json:"message"`
	Index        int            `json:"index"`
	ContentBlock anthropicBlock `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
}

func (p *anthropicStream) data(line []byte) bool {
	var ev anthropicEvent
	if json.Unmarshal(line, &ev) != nil {
		return false
	}
	switch ev.Type {
	case "message_start":
		p.prompt = ev.Message.Usage.prompt()
	case "content_block_start":
		for len(p.blocks) <= ev.Index {
			p.blocks = append(p.blocks, anthropicBlock{})
			p.inputs = append(p.inputs, "")
		}
		p.blocks[ev.Index] = ev.ContentBlock
	case "content_block_delta":
		if ev.Index >= len(p.blocks) {
			return false
		}
		switch ev.Delta.Type {
		case "text_delta":
			p.blocks[ev.Index].Text += ev.Delta.Text
		case "input_json_delta":
			p.inputs[ev.Index] += ev.Delta.PartialJSON
		}
	case "message_stop":
		return true
	}
	return false
}

func (p *anthropicStream) usage() memory.PromptUsage { return p.prompt }

func (p *anthropicStream) answer() *memory.Message {
	var blocks []anthropicBlock
	for i, b := range p.blocks {
		if b.Type == "tool_use" {
			if in := p.inputs[i]; in != "" {
				b.Input = json.RawMessage(in)
			}
			if b.Name == "" {
				continue // cut before its name: it cannot be stored
			}
		}
		if b.Type != "" {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		return &memory.Message{Role: memory.RoleAssistant}
	}
	msgs, _ := fromAnthropic("assistant", blocks)
	return msgs[0]
}

func (f *anthropicFormat) flushBody(w *memory.GatewayWindow) ([]byte, error) {
	b, err := f.body(w)
	if err != nil {
		return nil, err
	}
	var turns []anthropicTurn
	out, tools, err := flushParts(b, "messages", &turns)
	if err != nil {
		return nil, err
	}
	instr, _ := json.Marshal(anthropicBlock{Type: "text", Text: memory.FlushInstruction})
	if n := len(turns); n > 0 && turns[n-1].Role == "user" {
		turns[n-1].Content = append(turns[n-1].Content, instr)
	} else {
		turns = append(turns, anthropicTurn{Role: "user", Content: []json.RawMessage{instr}})
	}
	tool, _ := json.Marshal(map[string]any{"name": memory.SaveMemoryTool, "description": memory.SaveMemoryDescription, "input_schema": saveMemorySchema})
	return flushRequest(out, "messages", turns, append(tools, tool), `{"type":"auto"}`)
}

func (f *anthropicFormat) notes(body []byte) []string {
	var a struct {
		Content []anthropicBlock `json:"content"`
	}
	if json.Unmarshal(body, &a) != nil {
		return nil
	}
	var notes []string
	for _, b := range a.Content {
		if b.Type == "tool_use" && b.Name == memory.SaveMemoryTool {
			notes = append(notes, savedNote(b.Input))
		}
	}
	return notes
}

func (f *anthropicFormat) stored(*Server, string, string, string) {}
