package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// OpenAI Chat Completions: POST /v1/chat/completions.

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// chatText reads a content field: a string or an array of parts.
func chatText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n")
}

func openaiError(w http.ResponseWriter, code, msg string) {
	writeJSON(w, 400, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": code}})
}

// functionTools reads OpenAI's tools: {"type":"function","function":{...}}
// in chat, flat {"type":"function","name",...} in Responses.
func functionTools(raw json.RawMessage) []tool {
	var list []struct {
		Type     string          `json:"type"`
		Name     string          `json:"name"`
		Tools    json.RawMessage `json:"tools"`
		Params   json.RawMessage `json:"parameters"`
		Function *struct {
			Name   string          `json:"name"`
			Params json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	_ = json.Unmarshal(raw, &list)
	var out []tool
	for _, t := range list {
		if t.Type == "namespace" {
			out = append(out, functionTools(t.Tools)...)
			continue
		}
		tl := tool{name: t.Name, custom: t.Type == "custom"}
		params := t.Params
		if t.Function != nil {
			tl.name, params = t.Function.Name, t.Function.Params
		}
		if t.Type == "local_shell" {
			tl.name = "local_shell"
		}
		_ = json.Unmarshal(params, &tl.schema)
		out = append(out, tl)
	}
	return out
}

func (m *Model) readChat(body map[string]json.RawMessage) (*call, string) {
	c := &call{api: "chat", tools: functionTools(body["tools"])}
	if len(body["tools"]) > 0 {
		c.segments = append(c.segments, m.seg(string(body["tools"])))
	}
	_ = json.Unmarshal(body["max_tokens"], &c.maxTokens)
	_ = json.Unmarshal(body["max_completion_tokens"], &c.maxTokens)
	var msgs []chatMessage
	if err := json.Unmarshal(body["messages"], &msgs); err != nil || len(msgs) == 0 {
		return nil, "'messages' must be a non-empty array"
	}
	var pending []string
	for i, msg := range msgs {
		if msg.Role == "tool" {
			if !contains(pending, msg.ToolCallID) {
				return nil, fmt.Sprintf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (messages.[%d], tool_call_id %s).", i, msg.ToolCallID)
			}
			pending = missing(pending, []string{msg.ToolCallID})
			c.results = append(c.results, result{msg.ToolCallID, chatText(msg.Content)})
		} else if len(pending) > 0 {
			return nil, fmt.Sprintf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(pending, ", "))
		}
		text := msg.Role + chatText(msg.Content)
		if msg.Role == "assistant" {
			for _, tc := range msg.ToolCalls {
				pending = append(pending, tc.ID)
				text += tc.Function.Name + tc.Function.Arguments
			}
		}
		c.segments = append(c.segments, m.seg(text))
	}
	if len(pending) > 0 {
		return nil, "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id': " + strings.Join(pending, ", ")
	}
	return c, ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// admitOpenAI answers an OpenAI-shaped call the model refuses: what its
// reader found wrong (violation) and what decide refuses are 400s, an
// overflow a context_length_exceeded in the API's own wording. It reports
// whether the call goes on.
func (m *Model) admitOpenAI(w http.ResponseWriter, api string, c *call, violation string, overflow func(outcome) string) (outcome, bool) {
	if violation != "" {
		openaiError(w, "invalid_request_error", m.violation(api, "%s", violation))
		return outcome{}, false
	}
	o, v := m.decide(c)
	switch {
	case v != "" && !o.overflow:
		openaiError(w, "invalid_request_error", v)
		return o, false
	case v != "":
		openaiError(w, "context_length_exceeded", overflow(o))
		return o, false
	}
	return o, true
}

func (m *Model) chat(w http.ResponseWriter, body map[string]json.RawMessage) {
	c, v := m.readChat(body)
	o, ok := m.admitOpenAI(w, "chat", c, v, func(o outcome) string {
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", m.cfg.Window, o.prompt+c.maxTokens, o.prompt, c.maxTokens)
	})
	if !ok {
		return
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	finish := "stop"
	var calls []map[string]any
	if o.kind == "tool" || o.kind == "flush" {
		id := callID("call", o.step)
		if o.kind == "flush" {
			id = fmt.Sprintf("call_flush%d", m.Stats().Calls)
		}
		calls = []map[string]any{{"id": id, "type": "function", "function": map[string]any{"name": o.tool.name, "arguments": o.args}}}
		msg["tool_calls"] = calls
		finish = "tool_calls"
	} else {
		msg["content"] = o.text
	}
	usage := map[string]any{"prompt_tokens": o.prompt, "completion_tokens": o.output, "total_tokens": o.prompt + o.output,
		"prompt_tokens_details": map[string]any{"cached_tokens": o.cached}}
	var model string
	_ = json.Unmarshal(body["model"], &model)
	id := fmt.Sprintf("chatcmpl-fake%d", m.Stats().Calls)
	var stream bool
	_ = json.Unmarshal(body["stream"], &stream)
	if !stream {
		writeJSON(w, 200, map[string]any{"id": id, "object": "chat.completion", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	var opts struct {
		IncludeUsage bool `json:"include_usage"`
	}
	_ = json.Unmarshal(body["stream_options"], &opts)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	chunk := func(delta map[string]any, finish any) {
		sse(w, "", map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	if calls != nil {
		fn := calls[0]["function"].(map[string]any)
		args := fn["arguments"].(string)
		half := len(args) / 2
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": calls[0]["id"], "type": "function",
			"function": map[string]any{"name": fn["name"], "arguments": args[:half]}}}}, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args[half:]}}}}, nil)
	} else {
		chunk(map[string]any{"content": o.text}, nil)
	}
	chunk(map[string]any{}, finish)
	if opts.IncludeUsage {
		sse(w, "", map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
