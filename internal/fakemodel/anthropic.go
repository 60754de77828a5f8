package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Anthropic Messages: POST /v1/messages and /v1/messages/count_tokens.

type anthMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Thinking     string          `json:"thinking"`
	Signature    string          `json:"signature"`
	Data         string          `json:"data"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// blocks reads a content field: a string is one text block.
func blocks(raw json.RawMessage) []anthBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthBlock{{Type: "text", Text: s}}
	}
	var out []anthBlock
	_ = json.Unmarshal(raw, &out)
	return out
}

// text is what a block says, for counting and for markers.
func (b anthBlock) text() string {
	switch b.Type {
	case "text":
		return b.Text
	case "thinking":
		return b.Thinking
	case "redacted_thinking":
		return b.Data
	case "tool_use":
		return b.Name + string(b.Input)
	case "tool_result":
		var parts []string
		for _, c := range blocks(b.Content) {
			parts = append(parts, c.text())
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

func anthError(w http.ResponseWriter, status int, kind, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}})
}

// readAnthropic reads and checks a Messages request; a non-empty string is
// the violation that refuses it.
func (m *Model) readAnthropic(body map[string]json.RawMessage) (*call, string) {
	c := &call{api: "anthropic"}
	var msgs []anthMessage
	if err := json.Unmarshal(body["messages"], &msgs); err != nil || len(msgs) == 0 {
		return nil, "messages: a non-empty array is required"
	}
	_ = json.Unmarshal(body["max_tokens"], &c.maxTokens)
	var thinking struct {
		Type   string `json:"type"`
		Budget int    `json:"budget_tokens"`
	}
	_ = json.Unmarshal(body["thinking"], &thinking)
	c.thinking = thinking.Type == "enabled" || thinking.Type == "adaptive"
	if thinking.Type == "enabled" && thinking.Budget >= c.maxTokens {
		return nil, fmt.Sprintf("`max_tokens` must be greater than `thinking.budget_tokens` (%d >= %d)", thinking.Budget, c.maxTokens)
	}
	breakpoints := 0
	var tools []struct {
		Name         string          `json:"name"`
		Schema       json.RawMessage `json:"input_schema"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	_ = json.Unmarshal(body["tools"], &tools)
	toolsBreak := false
	for _, t := range tools {
		tl := tool{name: t.Name}
		_ = json.Unmarshal(t.Schema, &tl.schema)
		c.tools = append(c.tools, tl)
		if t.CacheControl != nil {
			breakpoints++
			toolsBreak = true
		}
	}
	if len(body["tools"]) > 0 {
		c.segments = append(c.segments, m.seg(string(body["tools"])))
		c.segments[len(c.segments)-1].breakpoint = toolsBreak
	}
	if sys := body["system"]; len(sys) > 0 {
		for _, b := range blocks(sys) {
			if b.CacheControl != nil {
				breakpoints++
			}
			c.segments = append(c.segments, m.seg(b.text()))
			c.segments[len(c.segments)-1].breakpoint = b.CacheControl != nil
		}
	}
	if msgs[0].Role != "user" {
		return nil, "messages: the first message must use the user role"
	}
	var pending []string // tool_use ids the next user turn must answer
	lastToolTurn := -1   // the last assistant turn with tool_use
	for i, msg := range msgs {
		bs := blocks(msg.Content)
		var uses, results []string
		for j, b := range bs {
			if b.CacheControl != nil {
				breakpoints++
			}
			switch b.Type {
			case "tool_use":
				uses = append(uses, b.ID)
			case "tool_result":
				results = append(results, b.ToolUseID)
				c.results = append(c.results, result{b.ToolUseID, b.text()})
			case "thinking":
				if msg.Role != "assistant" || b.Signature != sign(b.Thinking) {
					return nil, fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
				}
			case "redacted_thinking":
				if msg.Role != "assistant" || !strings.HasPrefix(b.Data, "redacted:") {
					return nil, fmt.Sprintf("messages.%d.content.%d: Invalid `data` in `redacted_thinking` block", i, j)
				}
			}
			c.segments = append(c.segments, m.seg(msg.Role+b.Type+b.text()))
			c.segments[len(c.segments)-1].breakpoint = b.CacheControl != nil
		}
		if msg.Role == "system" {
			// A mid-conversation system message (which Claude Code sends):
			// the API takes one only right after a user turn, and text only.
			if i == 0 || msgs[i-1].Role != "user" {
				return nil, fmt.Sprintf("messages.%d: a system message must immediately follow a user message", i)
			}
			for j, b := range bs {
				if b.Type != "text" {
					return nil, fmt.Sprintf("messages.%d.content.%d: a system message may only contain text blocks, found `%s`", i, j, b.Type)
				}
			}
			continue
		}
		if msg.Role != "user" && msg.Role != "assistant" {
			return nil, fmt.Sprintf("messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
		}
		if len(pending) > 0 {
			if msg.Role != "user" || !sameSet(pending, results) {
				return nil, fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(missing(pending, results), ", "))
			}
		} else if len(results) > 0 {
			return nil, fmt.Sprintf("messages.%d.content: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, results[0])
		}
		pending = nil
		if msg.Role == "assistant" {
			pending = uses
			if len(uses) > 0 {
				lastToolTurn = i
			}
		}
	}
	if len(pending) > 0 {
		return nil, "the final assistant message's `tool_use` blocks have no `tool_result` (prefill cannot end in tool_use)"
	}
	// The thinking-block rule: with thinking on, the assistant turn of the
	// current tool loop (the request ends with its results) must start with
	// its thinking block.
	last := len(msgs) - 1
	for last > 0 && msgs[last].Role == "system" {
		last--
	}
	if c.thinking && lastToolTurn >= 0 && lastToolTurn == last-1 {
		if bs := blocks(msgs[lastToolTurn].Content); len(bs) == 0 || (bs[0].Type != "thinking" && bs[0].Type != "redacted_thinking") {
			first := ""
			if len(bs) > 0 {
				first = bs[0].Type
			}
			return nil, fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).", lastToolTurn, first)
		}
	}
	if breakpoints > 4 {
		return nil, fmt.Sprintf("A maximum of 4 blocks with cache_control may be provided. Found %d.", breakpoints)
	}
	return c, ""
}

func sameSet(a, b []string) bool { return len(missing(a, b)) == 0 && len(missing(b, a)) == 0 }

// missing returns the ids of want not in got.
func missing(want, got []string) []string {
	var out []string
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

func (m *Model) countTokens(w http.ResponseWriter, body map[string]json.RawMessage) {
	m.mu.Lock()
	m.stats.Counts++
	m.mu.Unlock()
	body["max_tokens"] = json.RawMessage("1")
	c, v := m.readAnthropic(body)
	if v != "" {
		anthError(w, 400, "invalid_request_error", v)
		return
	}
	writeJSON(w, 200, map[string]any{"input_tokens": promptTokens(c.segments)})
}

func (m *Model) anthropic(w http.ResponseWriter, body map[string]json.RawMessage) {
	c, v := m.readAnthropic(body)
	if v != "" {
		anthError(w, 400, "invalid_request_error", m.violation("anthropic", "%s", v))
		return
	}
	o, v := m.decide(c)
	if v != "" && !o.overflow {
		anthError(w, 400, "invalid_request_error", v)
		return
	}
	if v != "" {
		anthError(w, 400, "invalid_request_error", fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again", o.prompt, c.maxTokens, m.cfg.Window))
		return
	}
	var content []map[string]any
	if o.thinking != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": o.thinking, "signature": sign(o.thinking)})
	}
	stop := "end_turn"
	switch o.kind {
	case "tool", "flush":
		id := callID("toolu", o.step)
		if o.kind == "flush" {
			id = fmt.Sprintf("toolu_flush%d", m.Stats().Calls)
		}
		content = append(content, map[string]any{"type": "tool_use", "id": id, "name": o.tool.name, "input": json.RawMessage(o.args)})
		stop = "tool_use"
	default:
		content = append(content, map[string]any{"type": "text", "text": o.text})
	}
	usage := map[string]any{"input_tokens": o.prompt - o.cached - o.written, "cache_read_input_tokens": o.cached,
		"cache_creation_input_tokens": o.written, "output_tokens": o.output}
	var model string
	_ = json.Unmarshal(body["model"], &model)
	var stream bool
	_ = json.Unmarshal(body["stream"], &stream)
	id := fmt.Sprintf("msg_fake%d", m.Stats().Calls)
	if !stream {
		writeJSON(w, 200, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	start := map[string]any{"input_tokens": usage["input_tokens"], "cache_read_input_tokens": o.cached, "cache_creation_input_tokens": o.written, "output_tokens": 1}
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start}})
	for i, b := range content {
		var first map[string]any
		var deltas []map[string]any
		switch b["type"] {
		case "thinking":
			first = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
			deltas = []map[string]any{{"type": "thinking_delta", "thinking": b["thinking"]}, {"type": "signature_delta", "signature": b["signature"]}}
		case "tool_use":
			first = map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}
			args := string(b["input"].(json.RawMessage))
			half := len(args) / 2
			deltas = []map[string]any{{"type": "input_json_delta", "partial_json": args[:half]}, {"type": "input_json_delta", "partial_json": args[half:]}}
		default:
			first = map[string]any{"type": "text", "text": ""}
			deltas = []map[string]any{{"type": "text_delta", "text": b["text"]}}
		}
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": first})
		for _, d := range deltas {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": o.output}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
