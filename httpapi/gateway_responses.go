package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

// POST /v1/responses in the OpenAI Responses format (the only one Codex CLI
// speaks). The input items become ctxd messages: a message item one
// message (user message items in a row one); the assistant's items in a row (reasoning, its message, its
// function calls) one assistant message with tool calls; a function call's
// output one tool message. A message sent as stored goes upstream as the
// client's own items, so reasoning items (encrypted or not) pass back
// byte-identical; one rebuilt from storage (a summary, a pruned output)
// goes without its reasoning, which the API accepts.
//
// previous_response_id: the client sends only its new input; ctxd knows
// which session and stored answer the id names (from a response it
// relayed with store not false) and sends the upstream its whole window,
// never the id. ctxd keeps these ids in memory: after a restart an id
// answers previous_response_not_found, as OpenAI does for one it does not
// know, and the client resends its history.

type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       json.RawMessage `json:"instructions"`
	Tools              json.RawMessage `json:"tools"`
	Stream             bool            `json:"stream"`
	PreviousResponseID string          `json:"previous_response_id"`
	Store              *bool           `json:"store"`
	MaxOutputTokens    int             `json:"max_output_tokens"`
	PromptCacheKey     string          `json:"prompt_cache_key"`
	User               string          `json:"user"`
}

// responsesItem is what ctxd reads of an input or output item.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments string          `json:"arguments,omitempty"`
	Input     string          `json:"input,omitempty"`  // a custom tool call's
	Output    json.RawMessage `json:"output,omitempty"` // a call output's: text or content parts
}

// customCall is the ToolCall.Type of a custom (freeform) tool call: its
// input is text, not JSON arguments, and it is sent back as one.
const customCall = "custom"

// responseIDs remembers which session and stored answer each relayed
// response id names, for previous_response_id. Bounded: when full it
// starts over, and an id it forgot answers as one it never knew.
type responseIDs struct {
	mu  sync.Mutex
	ids map[string]responseRef
}

type responseRef struct{ tenant, session, answer string }

const maxResponseIDs = 100_000

func (r *responseIDs) put(id string, ref responseRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil || len(r.ids) >= maxResponseIDs {
		r.ids = map[string]responseRef{}
	}
	r.ids[id] = ref
}

func (r *responseIDs) get(id string) (responseRef, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, ok := r.ids[id]
	return ref, ok
}

func (s *Server) responses(c echo.Context) error {
	var req responsesRequest
	raw, _, _, err := decodeModelCall(c, &req, "", nil)
	if err != nil {
		return err
	}
	items, err := responsesInput(req.Input)
	if err != nil {
		return err
	}
	f := &responsesFormat{raw: raw, items: items, store: req.Store == nil || *req.Store}
	var history []*memory.Message
	system, firstUser := "", ""
	if len(bytes.TrimSpace(req.Instructions)) > 0 && string(req.Instructions) != "null" {
		if system, err = textOf(req.Instructions); err != nil {
			return memory.Errorf(memory.EINVALID, "instructions: %v", err)
		}
		history = append(history, &memory.Message{Role: memory.RoleSystem, Content: system,
			Metadata: map[string]any{memory.InstructionsKey: true}})
		f.origin = append(f.origin, itemRange{-1, -1})
	}
	msgs, origin, err := fromResponses(items)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Role == memory.RoleUser && firstUser == "" {
			firstUser = m.Content
		}
	}
	history = append(history, msgs...)
	f.origin = append(f.origin, origin...)
	window, err := contextWindow(c, req.Model)
	if err != nil {
		return err
	}
	tools := toolsOf(req.Tools)
	named := c.Request().Header.Get(SessionHeader)
	user := req.User
	if user == "" && named == "" {
		// Codex's conversation id: one per conversation (its subagents
		// have their own), so it names the session as it is
		if memory.ValidateSessionID(req.PromptCacheKey) == nil {
			named = req.PromptCacheKey
		} else {
			user = req.PromptCacheKey
		}
	}
	call := gatewayCall{
		req: memory.GatewayRequest{
			History: history, ContextWindow: window, Reserve: answerReserve(req.MaxOutputTokens, window), Tools: tools,
		},
		format:   f,
		upstream: s.opts.Gateway.OpenAI,
		stream:   req.Stream,
	}
	if req.PreviousResponseID != "" {
		ref, ok := s.responseIDs.get(req.PreviousResponseID)
		if !ok || ref.tenant != memory.TenantFromContext(c.Request().Context()) {
			return &providerError{status: http.StatusBadRequest, code: "previous_response_not_found", param: "previous_response_id",
				msg: "Previous response with id '" + req.PreviousResponseID + "' not found (ctxd keeps response ids in memory, for responses it relayed with store not false)."}
		}
		call.req.Session, call.req.After = ref.session, ref.answer
		delete(f.raw, "previous_response_id")
	} else {
		call.req.Session = memory.GatewaySessionID(named, user, system, firstUser)
	}
	return s.serveGateway(c, call)
}

// responsesCompact answers POST /v1/responses/compact: ctxd keeps the
// conversation's window within the model's itself, so it refuses, in
// OpenAI's error shape, rather than replace the client's history with an
// upstream's opaque summary that ctxd could not match against what it
// stored.
func (s *Server) responsesCompact(echo.Context) error {
	// 400, not 501: a client retries a 5xx.
	return &providerError{status: http.StatusBadRequest, code: "unsupported_by_ctxd",
		msg: "ctxd compacts this conversation itself and keeps every window within the model's: send the whole history (or previous_response_id) to /v1/responses instead of compacting it"}
}

// responsesInput reads the input field: a string is one user message.
func responsesInput(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, memory.Errorf(memory.EINVALID, "input: required")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, memory.Errorf(memory.EINVALID, "input: %v", err)
		}
		b, _ := json.Marshal(map[string]string{"role": "user", "content": s})
		return []json.RawMessage{b}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, memory.Errorf(memory.EINVALID, "input: not a string or an array of items: %v", err)
	}
	return items, nil
}

// itemRange is the input items [from, to) one history message came from
// (-1, -1: the instructions).
type itemRange struct{ from, to int }

// assistantSide reports whether an item is the model's (it joins the
// assistant message being built): one with a role of another than the
// assistant (Codex's additional_tools, a developer item) is not.
func assistantSide(it responsesItem) bool {
	if it.Role != "" && it.Role != "assistant" {
		return false
	}
	switch it.Type {
	case "message", "":
		return it.Role == "assistant"
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output", "mcp_approval_response",
		"computer_call_output", "item_reference":
		return false
	}
	return true // reasoning, function and custom tool calls, the hosted tools' calls
}

// fromResponses turns input items into ctxd messages and the items each
// came from (see the top of the file).
func fromResponses(items []json.RawMessage) ([]*memory.Message, []itemRange, error) {
	var msgs []*memory.Message
	var origin []itemRange
	var asst *memory.Message
	var texts, asstRaw, rawTypes []string
	closeAssistant := func() {
		if asst == nil {
			return
		}
		if b, _ := json.Marshal(asstRaw); len(asstRaw) > 0 && len(b) <= maxRawItemsBytes {
			asst.Metadata = map[string]any{rawItemsKey: string(b)}
		} else {
			texts = append(texts, rawTypes...) // too large to keep: named
		}
		asst.Content = strings.Join(texts, "\n")
		if asst.Content == "" && len(asst.ToolCalls) == 0 {
			asst.Content = "[reasoning]"
		}
		asst, texts, asstRaw, rawTypes = nil, nil, nil, nil
	}
	for i, rawItem := range items {
		var it responsesItem
		if err := json.Unmarshal(rawItem, &it); err != nil {
			return nil, nil, memory.Errorf(memory.EINVALID, "input[%d]: %v", i, err)
		}
		if assistantSide(it) {
			if asst == nil {
				asst = &memory.Message{Role: memory.RoleAssistant}
				msgs = append(msgs, asst)
				origin = append(origin, itemRange{i, i})
			}
			origin[len(origin)-1].to = i + 1
			switch it.Type {
			case "message", "":
				text, err := textOf(it.Content)
				if err != nil {
					return nil, nil, memory.Errorf(memory.EINVALID, "input[%d].content: %v", i, err)
				}
				texts = append(texts, text)
			case "function_call":
				asst.ToolCalls = append(asst.ToolCalls, memory.ToolCall{ID: it.CallID, Type: "function",
					Function: memory.FunctionCall{Name: it.Name, Arguments: it.Arguments}})
			case "custom_tool_call":
				asst.ToolCalls = append(asst.ToolCalls, memory.ToolCall{ID: it.CallID, Type: customCall,
					Function: memory.FunctionCall{Name: it.Name, Arguments: it.Input}})
			case "reasoning":
				// not stored: it goes back only as the client's own item
			default:
				// a hosted tool's call or another item ctxd does not
				// model: kept as sent, and sent back with a rebuilt turn
				asstRaw = append(asstRaw, string(rawItem))
				rawTypes = append(rawTypes, "["+it.Type+"]")
			}
			continue
		}
		closeAssistant()
		m := &memory.Message{}
		switch it.Type {
		case "message", "":
			text, err := textOf(it.Content)
			if err != nil {
				return nil, nil, memory.Errorf(memory.EINVALID, "input[%d].content: %v", i, err)
			}
			switch it.Role {
			case "user":
				if n := len(msgs); n > 0 && msgs[n-1].Role == memory.RoleUser && msgs[n-1].Metadata == nil && origin[n-1].to == i {
					// One user turn of several messages (Codex sends its
					// environment, then the user's instruction) is one
					// message: the window keeps a turn whole, and the
					// conversation's first turn (its task) with it.
					if text != "" {
						msgs[n-1].Content += "\n\n" + text
					}
					origin[n-1].to = i + 1
					continue
				}
				m.Role = memory.RoleUser
			case "system", "developer":
				m.Role = memory.RoleSystem
			default:
				return nil, nil, memory.Errorf(memory.EINVALID, "input[%d].role: %q is not one of user, assistant, system, developer", i, it.Role)
			}
			m.Content = text
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output", "computer_call_output":
			text, err := textOf(it.Output)
			if err != nil {
				return nil, nil, memory.Errorf(memory.EINVALID, "input[%d].output: %v", i, err)
			}
			m.Role, m.ToolCallID, m.Content = memory.RoleTool, it.CallID, text
		default:
			// An item ctxd does not model (Codex's additional_tools holds
			// its tools): stored as sent, so that a window rebuilt
			// without the client's items sends it byte-identical, and
			// counted at its size. One of the developer or the system
			// is part of the prompt, kept in every window.
			m.Role, m.Content = memory.RoleUser, string(rawItem)
			if it.Role == "developer" || it.Role == "system" {
				m.Role = memory.RoleSystem
			}
			m.Metadata = map[string]any{rawItemKey: true}
		}
		if m.Content == "" && m.Role != memory.RoleTool {
			m.Content = "[empty]"
		}
		msgs = append(msgs, m)
		origin = append(origin, itemRange{i, i + 1})
	}
	closeAssistant()
	return msgs, origin, nil
}

// rawItemKey marks a message whose content is an input item ctxd does not
// model, as the client sent it; rawItemsKey holds, in an assistant
// message's metadata, such items of the assistant's (a JSON array of
// their texts), when they fit in maxRawItemsBytes of the metadata's limit.
const (
	rawItemKey       = "ctxd_item"
	rawItemsKey      = "ctxd_items"
	maxRawItemsBytes = 12 << 10
)

// responsesFormat speaks Responses for one request.
type responsesFormat struct {
	raw    map[string]json.RawMessage
	items  []json.RawMessage // the client's input items, as sent
	origin []itemRange       // for each history message, the items it came from
	store  bool              // the response may be named by a later previous_response_id
	id     string            // the upstream's response id, once read
}

func (f *responsesFormat) path() string { return "/responses" }

func (f *responsesFormat) auth(in, out http.Header, key string) { (&openaiFormat{}).auth(in, out, key) }

// body is the client's request with the window's items in place of its
// input; the instructions stay the client's field.
func (f *responsesFormat) body(w *memory.GatewayWindow) ([]byte, error) {
	var input []json.RawMessage
	custom := map[string]bool{} // call ids of custom tool calls: their outputs are custom too
	for _, m := range w.Messages {
		for _, tc := range m.ToolCalls {
			if tc.Type == customCall {
				custom[tc.ID] = true
			}
		}
		if m.Client >= 0 {
			r := f.origin[m.Client]
			if r.from < 0 {
				continue // the instructions: the client's field, as sent
			}
			input = append(input, f.items[r.from:r.to]...)
			continue
		}
		items, err := toResponses(m.Message, custom)
		if err != nil {
			return nil, err
		}
		input = append(input, items...)
	}
	out := make(map[string]json.RawMessage, len(f.raw))
	for k, v := range f.raw {
		out[k] = v
	}
	b, err := json.Marshal(input)
	if err != nil {
		return nil, err
	}
	out["input"] = b
	lowerAnswer(out, w, "max_output_tokens")
	cacheKey(out, w)
	return json.Marshal(out)
}

// toResponses writes a stored message as input items.
func toResponses(m *memory.Message, custom map[string]bool) ([]json.RawMessage, error) {
	var items []any
	switch m.Role {
	case memory.RoleTool:
		typ := "function_call_output"
		if custom[m.ToolCallID] {
			typ = "custom_tool_call_output"
		}
		items = append(items, map[string]any{"type": typ, "call_id": m.ToolCallID, "output": m.Content})
	case memory.RoleAssistant:
		var raw []string
		if s, ok := m.Metadata[rawItemsKey].(string); ok && json.Unmarshal([]byte(s), &raw) == nil {
			for _, it := range raw {
				items = append(items, json.RawMessage(it))
			}
		}
		if m.Content != "" && m.Content != "[reasoning]" {
			items = append(items, map[string]any{"type": "message", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": m.Content}}})
		}
		for _, tc := range m.ToolCalls {
			if tc.Type == customCall {
				items = append(items, map[string]any{"type": "custom_tool_call", "call_id": tc.ID, "name": tc.Function.Name, "input": tc.Function.Arguments})
			} else {
				items = append(items, map[string]any{"type": "function_call", "call_id": tc.ID, "name": tc.Function.Name, "arguments": tc.Function.Arguments})
			}
		}
	default:
		if m.Metadata[rawItemKey] == true && json.Valid([]byte(m.Content)) {
			items = append(items, json.RawMessage(m.Content))
			break
		}
		items = append(items, map[string]any{"type": "message", "role": string(m.Role), "content": m.Content})
	}
	out := make([]json.RawMessage, len(items))
	for i, it := range items {
		var err error
		if out[i], err = json.Marshal(it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// responsesAnswer is what ctxd reads of a response object.
type responsesAnswer struct {
	ID     string            `json:"id"`
	Output []json.RawMessage `json:"output"`
	Usage  *responsesUsage   `json:"usage"`
}

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

func (u *responsesUsage) prompt() memory.PromptUsage {
	if u == nil {
		return memory.PromptUsage{}
	}
	return memory.PromptUsage{Input: u.InputTokens, CacheRead: u.InputTokensDetails.CachedTokens}
}

// outputMessage is the assistant message an answer's output items add up to.
func outputMessage(output []json.RawMessage) *memory.Message {
	msgs, _, err := fromResponses(output)
	for _, m := range msgs {
		if err == nil && m.Role == memory.RoleAssistant {
			if m.Content == "[reasoning]" {
				m.Content = ""
			}
			return m
		}
	}
	return &memory.Message{Role: memory.RoleAssistant}
}

func (f *responsesFormat) answer(body []byte) (*memory.Message, memory.PromptUsage, error) {
	var a responsesAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, memory.PromptUsage{}, err
	}
	f.id = a.ID
	return outputMessage(a.Output), a.Usage.prompt(), nil
}

// stored records the answer's response id for previous_response_id.
func (f *responsesFormat) stored(s *Server, tenant, session, answer string) {
	if f.store && f.id != "" && answer != "" {
		s.responseIDs.put(f.id, responseRef{tenant: tenant, session: session, answer: answer})
	}
}

func (f *responsesFormat) stream() streamParser { return &responsesStream{f: f} }

// responsesStream adds up a streamed response: the items as each is done,
// replaced by the final response's output when it comes.
type responsesStream struct {
	f      *responsesFormat
	items  []json.RawMessage
	prompt memory.PromptUsage
}

type responsesEvent struct {
	Type     string          `json:"type"`
	Item     json.RawMessage `json:"item"`
	Response responsesAnswer `json:"response"`
}

func (p *responsesStream) data(line []byte) bool {
	var ev responsesEvent
	if json.Unmarshal(line, &ev) != nil {
		return false
	}
	if ev.Response.ID != "" {
		p.f.id = ev.Response.ID
	}
	switch ev.Type {
	case "response.output_item.done":
		p.items = append(p.items, ev.Item)
	case "response.completed", "response.incomplete", "response.failed":
		if len(ev.Response.Output) > 0 {
			p.items = ev.Response.Output
		}
		p.prompt = ev.Response.Usage.prompt()
		return true
	}
	return false
}

func (p *responsesStream) answer() *memory.Message { return outputMessage(p.items) }

func (p *responsesStream) usage() memory.PromptUsage { return p.prompt }

func (f *responsesFormat) flushBody(w *memory.GatewayWindow) ([]byte, error) {
	b, err := f.body(w)
	if err != nil {
		return nil, err
	}
	var input []json.RawMessage
	out, tools, err := flushParts(b, "input", &input)
	if err != nil {
		return nil, err
	}
	instr, _ := json.Marshal(map[string]string{"role": "user", "content": memory.FlushInstruction})
	tool, _ := json.Marshal(map[string]any{"type": "function", "name": memory.SaveMemoryTool,
		"description": memory.SaveMemoryDescription, "parameters": saveMemorySchema})
	// The flush turn is ctxd's: it is not stored upstream, nor named later.
	out["store"] = json.RawMessage("false")
	return flushRequest(out, "input", append(input, instr), append(tools, tool), `"auto"`)
}

func (f *responsesFormat) notes(body []byte) []string {
	var a responsesAnswer
	if json.Unmarshal(body, &a) != nil {
		return nil
	}
	var notes []string
	for _, raw := range a.Output {
		var it responsesItem
		if json.Unmarshal(raw, &it) == nil && it.Type == "function_call" && it.Name == memory.SaveMemoryTool {
			notes = append(notes, savedNote([]byte(it.Arguments)))
		}
	}
	return notes
}
