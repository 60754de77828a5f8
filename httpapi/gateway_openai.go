package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

// POST /v1/chat/completions in the OpenAI Chat Completions format.

type openaiRequest struct {
	Model               string            `json:"model"`
	Messages            []json.RawMessage `json:"messages"`
	User                string            `json:"user"`
	MaxTokens           int               `json:"max_tokens"`
	MaxCompletionTokens int               `json:"max_completion_tokens"`
	Stream              bool              `json:"stream"`
	Tools               json.RawMessage   `json:"tools"`
}

type openaiMessage struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"`
	Name       string            `json:"name,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
	ToolCalls  []memory.ToolCall `json:"tool_calls,omitempty"`
}

func (s *Server) chatCompletions(c echo.Context) error {
	var req openaiRequest
	raw, messages, rep, err := decodeModelCall(c, &req, "messages", &s.lists)
	if err != nil {
		return err
	}
	req.Messages = messages
	history := make([]*memory.Message, 0, len(req.Messages))
	decoded := make([]*decodedMessage, len(req.Messages))
	repeated := rep.decoded()
	system, firstUser := "", ""
	for i, rm := range req.Messages {
		d := (*decodedMessage)(nil)
		if i < len(repeated) {
			d = repeated[i] // sent before, byte for byte, and read then
		} else if d, err = s.openaiMessage(i, rm); err != nil {
			return err
		}
		decoded[i] = d
		m := d.msgs[0]
		switch {
		case m.Role == memory.RoleSystem && system == "":
			system = m.Content
		case m.Role == memory.RoleUser && firstUser == "":
			firstUser = m.Content
		}
		history = append(history, m)
	}
	rep.keep(decoded)
	window, err := contextWindow(c, req.Model)
	if err != nil {
		return err
	}
	limit := req.MaxCompletionTokens
	if limit == 0 {
		limit = req.MaxTokens
	}
	tools := toolsOf(req.Tools)
	call := gatewayCall{
		req: memory.GatewayRequest{
			Session: memory.GatewaySessionID(c.Request().Header.Get(SessionHeader), req.User, system, firstUser),
			History: history, ContextWindow: window, Reserve: answerReserve(limit, window), Tools: tools,
			Repeat: rep.history(history, min(rep.k, len(history))),
		},
		format:   &openaiFormat{raw: raw, messages: req.Messages},
		upstream: s.opts.Gateway.OpenAI,
		stream:   req.Stream,
	}
	return s.serveGateway(c, call)
}

// openaiMessage reads client message i: from what it decoded to when the
// client sent it before (see decodedCache), else decoded.
func (s *Server) openaiMessage(i int, rm json.RawMessage) (*decodedMessage, error) {
	if d, ok := s.decodedOpenAI.get(rm); ok {
		return d, nil
	}
	var om openaiMessage
	if err := json.Unmarshal(rm, &om); err != nil {
		return nil, memory.Errorf(memory.EINVALID, "messages[%d]: %v", i, err)
	}
	text, err := textOf(om.Content)
	if err != nil {
		return nil, memory.Errorf(memory.EINVALID, "messages[%d].content: %v", i, err)
	}
	role := memory.Role(om.Role)
	if role == "developer" {
		role = memory.RoleSystem // the o-series name of the system role
	}
	m := &memory.Message{Role: role, Content: text, Name: om.Name, ToolCallID: om.ToolCallID, ToolCalls: om.ToolCalls}
	s.decodedOpenAI.put(rm, []*memory.Message{m}, false)
	return &decodedMessage{msgs: []*memory.Message{m}}, nil
}

// openaiFormat speaks Chat Completions for one request.
type openaiFormat struct {
	raw      map[string]json.RawMessage // the client's body: all but messages is passed on as sent
	messages []json.RawMessage          // the client's messages, as sent
}

func (f *openaiFormat) path() string { return "/chat/completions" }

func (f *openaiFormat) auth(in, out http.Header, key string) {
	// An SDK without a key still sends "Bearer " with nothing after it.
	if _, ok := bearer(in.Get(echo.HeaderAuthorization)); ok {
		out.Set(echo.HeaderAuthorization, in.Get(echo.HeaderAuthorization))
	} else if key != "" {
		out.Set(echo.HeaderAuthorization, "Bearer "+key)
	}
}

// body is the client's request with the window in place of its messages:
// a message sent as the client stored it goes in the client's own form.
func (f *openaiFormat) body(w *memory.GatewayWindow) ([]byte, error) {
	msgs := make([]json.RawMessage, 0, len(w.Messages))
	for _, m := range w.Messages {
		if m.Client >= 0 {
			msgs = append(msgs, f.messages[m.Client])
			continue
		}
		om := openaiMessage{Role: string(m.Role), Name: m.Name, ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			om.Content, _ = json.Marshal(m.Content)
		} else {
			om.Content = json.RawMessage("null")
		}
		b, err := json.Marshal(om)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, b)
	}
	out := make(map[string]json.RawMessage, len(f.raw))
	for k, v := range f.raw {
		out[k] = v
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		return nil, err
	}
	out["messages"] = b
	lowerAnswer(out, w, "max_tokens", "max_completion_tokens")
	cacheKey(out, w)
	return json.Marshal(out)
}

type openaiAnswer struct {
	Choices []struct {
		Message openaiMessage `json:"message"`
	} `json:"choices"`
	Usage *openaiUsage `json:"usage"`
}

type openaiUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *openaiUsage) prompt() memory.PromptUsage {
	if u == nil {
		return memory.PromptUsage{}
	}
	return memory.PromptUsage{Input: u.PromptTokens, CacheRead: u.PromptTokensDetails.CachedTokens}
}

func (f *openaiFormat) answer(body []byte) (*memory.Message, memory.PromptUsage, error) {
	var a openaiAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, memory.PromptUsage{}, err
	}
	if len(a.Choices) == 0 {
		return &memory.Message{Role: memory.RoleAssistant}, a.Usage.prompt(), nil
	}
	m := a.Choices[0].Message
	text, err := textOf(m.Content)
	if err != nil {
		return nil, memory.PromptUsage{}, err
	}
	return &memory.Message{Role: memory.RoleAssistant, Content: text, ToolCalls: m.ToolCalls}, a.Usage.prompt(), nil
}

func (f *openaiFormat) stream() streamParser { return &openaiStream{} }

// openaiStream adds up the deltas of the first choice. Usage comes in the
// last chunk only when the client asked for it (stream_options): ctxd does
// not ask in its place, since that chunk would reach a client that did not.
type openaiStream struct {
	text   strings.Builder
	calls  []memory.ToolCall
	prompt memory.PromptUsage
}

func (p *openaiStream) usage() memory.PromptUsage { return p.prompt }

type openaiChunk struct {
	Usage   *openaiUsage `json:"usage"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index int `json:"index"`
				memory.ToolCall
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
}

func (p *openaiStream) data(line []byte) bool {
	if string(line) == "[DONE]" {
		return true
	}
	var ch openaiChunk
	if json.Unmarshal(line, &ch) != nil {
		return false // not ours to judge: the client gets it as it came
	}
	if u := ch.Usage.prompt(); u.Input > 0 {
		p.prompt = u
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue
		}
		p.text.WriteString(c.Delta.Content)
		for _, tc := range c.Delta.ToolCalls {
			for len(p.calls) <= tc.Index {
				p.calls = append(p.calls, memory.ToolCall{Type: "function"})
			}
			call := &p.calls[tc.Index]
			if tc.ID != "" {
				call.ID = tc.ID
			}
			if tc.Type != "" {
				call.Type = tc.Type
			}
			call.Function.Name += tc.Function.Name
			call.Function.Arguments += tc.Function.Arguments
		}
	}
	return false
}

func (p *openaiStream) answer() *memory.Message {
	var calls []memory.ToolCall
	for _, c := range p.calls {
		if c.Function.Name != "" { // a call cut before its name cannot be stored
			calls = append(calls, c)
		}
	}
	return &memory.Message{Role: memory.RoleAssistant, Content: p.text.String(), ToolCalls: calls}
}

func (f *openaiFormat) flushBody(w *memory.GatewayWindow) ([]byte, error) {
	b, err := f.body(w)
	if err != nil {
		return nil, err
	}
	var msgs []json.RawMessage
	out, tools, err := flushParts(b, "messages", &msgs)
	if err != nil {
		return nil, err
	}
	instr, _ := json.Marshal(map[string]string{"role": "user", "content": memory.FlushInstruction})
	tool, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]any{
		"name": memory.SaveMemoryTool, "description": memory.SaveMemoryDescription, "parameters": saveMemorySchema}})
	delete(out, "stream_options")
	return flushRequest(out, "messages", append(msgs, instr), append(tools, tool), `"auto"`)
}

func (f *openaiFormat) notes(body []byte) []string {
	var a openaiAnswer
	if json.Unmarshal(body, &a) != nil || len(a.Choices) == 0 {
		return nil
	}
	var notes []string
	for _, tc := range a.Choices[0].Message.ToolCalls {
		if tc.Function.Name == memory.SaveMemoryTool {
			notes = append(notes, savedNote([]byte(tc.Function.Arguments)))
		}
	}
	return notes
}

func (f *openaiFormat) stored(*Server, string, string, string) {}
