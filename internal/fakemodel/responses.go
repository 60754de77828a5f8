package fakemodel

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// OpenAI Responses: POST /v1/responses.

type respItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
	Encrypted string          `json:"encrypted_content"`
	Action    json.RawMessage `json:"action"`
	Tools     json.RawMessage `json:"tools"`
}

// The call items and the output items that answer them.
var respCalls = map[string]bool{"function_call": true, "custom_tool_call": true, "local_shell_call": true}
var respOutputs = map[string]bool{"function_call_output": true, "custom_tool_call_output": true, "local_shell_call_output": true}

// encrypt seals a reasoning text as the client must send it back.
func encrypt(text string) string { return hex.EncodeToString([]byte(text)) + "." + sign(text) }

func decrypts(enc string) bool {
	hexText, sig, ok := strings.Cut(enc, ".")
	text, err := hex.DecodeString(hexText)
	return ok && err == nil && sig == sign(string(text))
}

func (m *Model) readResponses(body map[string]json.RawMessage) (*call, string) {
	c := &call{api: "responses", tools: functionTools(body["tools"])}
	if len(body["tools"]) > 0 {
		c.segments = append(c.segments, m.seg(string(body["tools"])))
	}
	if p := body["previous_response_id"]; len(p) > 0 && string(p) != "null" {
		return nil, "previous_response_id: this model stores no responses (send the whole input)"
	}
	var instructions string
	_ = json.Unmarshal(body["instructions"], &instructions)
	if instructions != "" {
		c.segments = append(c.segments, m.seg(instructions))
	}
	_ = json.Unmarshal(body["max_output_tokens"], &c.maxTokens)
	c.thinking = len(body["reasoning"]) > 0 && string(body["reasoning"]) != "null"
	var items []respItem
	var s string
	if json.Unmarshal(body["input"], &s) == nil {
		items = []respItem{{Type: "message", Role: "user", Content: body["input"]}}
	} else if err := json.Unmarshal(body["input"], &items); err != nil {
		return nil, "input: a string or an array of items is required: " + err.Error()
	}
	var pending []string
	for i, it := range items {
		if it.Type == "" {
			it.Type = "message"
		}
		text := it.Type + it.Role
		switch {
		case it.Type == "message":
			text += chatText(it.Content)
		case it.Type == "additional_tools":
			// Codex sends its tools as an input item.
			c.tools = append(c.tools, functionTools(it.Tools)...)
			text += string(it.Tools)
		case it.Type == "reasoning":
			if !decrypts(it.Encrypted) {
				return nil, fmt.Sprintf("The encrypted content for item %s could not be verified.", it.ID)
			}
			if i+1 >= len(items) || (!respCalls[items[i+1].Type] && items[i+1].Type != "message") {
				return nil, fmt.Sprintf("Item '%s' of type 'reasoning' was provided without its required following item.", it.ID)
			}
			text += it.Encrypted
		case respCalls[it.Type]:
			if k, ok := stepOf(it.ID); ok && (i == 0 || items[i-1].Type != "reasoning") && m.reasoned(k) {
				return nil, fmt.Sprintf("Item '%s' of type '%s' was provided without its required 'reasoning' item.", it.ID, it.Type)
			}
			pending = append(pending, it.CallID)
			text += it.Name + it.Arguments + it.Input + string(it.Action)
		case respOutputs[it.Type]:
			if !contains(pending, it.CallID) {
				return nil, fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID)
			}
			pending = missing(pending, []string{it.CallID})
			out := chatText(it.Output)
			c.results = append(c.results, result{it.CallID, out})
			text += out
		}
		c.segments = append(c.segments, m.seg(text))
	}
	if len(pending) > 0 {
		return nil, "No tool output found for function call " + pending[0] + "."
	}
	return c, ""
}

// reasoned tells whether the model answered step k with a reasoning item
// (then its function call may not come back without it).
func (m *Model) reasoned(k int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reasonedSteps[k]
}

func (m *Model) responses(w http.ResponseWriter, body map[string]json.RawMessage) {
	c, v := m.readResponses(body)
	o, ok := m.admitOpenAI(w, "responses", c, v, func(o outcome) string {
		return fmt.Sprintf("Your input exceeds the context window of this model (%d + %d > %d).", o.prompt, c.maxTokens, m.cfg.Window)
	})
	if !ok {
		return
	}
	n := m.Stats().Calls
	var output []map[string]any
	if o.thinking != "" {
		output = append(output, map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_fake%d", n),
			"summary": []any{map[string]any{"type": "summary_text", "text": o.thinking}}, "encrypted_content": encrypt(o.thinking)})
	}
	switch o.kind {
	case "tool", "flush":
		callID, itemID := callID("call", o.step), callID("fc", o.step)
		if o.kind == "flush" {
			callID, itemID = fmt.Sprintf("call_flush%d", n), fmt.Sprintf("fc_flush%d", n)
		} else if o.thinking != "" {
			m.mu.Lock()
			m.reasonedSteps[o.step] = true
			m.mu.Unlock()
		}
		if o.tool.custom {
			output = append(output, map[string]any{"type": "custom_tool_call", "id": itemID, "call_id": callID,
				"name": o.tool.name, "input": o.args, "status": "completed"})
		} else {
			output = append(output, map[string]any{"type": "function_call", "id": itemID, "call_id": callID,
				"name": o.tool.name, "arguments": o.args, "status": "completed"})
		}
	default:
		output = append(output, map[string]any{"type": "message", "id": fmt.Sprintf("msg_fake%d", n), "role": "assistant",
			"status": "completed", "content": []any{map[string]any{"type": "output_text", "text": o.text, "annotations": []any{}}}})
	}
	var model string
	_ = json.Unmarshal(body["model"], &model)
	resp := map[string]any{"id": fmt.Sprintf("resp_fake%d", n), "object": "response", "created_at": 1700000000,
		"status": "completed", "model": model, "output": output,
		"usage": map[string]any{"input_tokens": o.prompt, "input_tokens_details": map[string]any{"cached_tokens": o.cached},
			"output_tokens": o.output, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": o.prompt + o.output}}
	var stream bool
	_ = json.Unmarshal(body["stream"], &stream)
	if !stream {
		writeJSON(w, 200, resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	seq := 0
	event := func(kind string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = kind, seq
		seq++
		sse(w, kind, fields)
	}
	started := map[string]any{}
	for k, v := range resp {
		started[k] = v
	}
	started["status"], started["output"] = "in_progress", []any{}
	delete(started, "usage")
	event("response.created", map[string]any{"response": started})
	for i, item := range output {
		event("response.output_item.added", map[string]any{"output_index": i, "item": item})
		if item["type"] == "message" {
			event("response.output_text.delta", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "delta": o.text})
			event("response.output_text.done", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "text": o.text})
		}
		event("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	event("response.completed", map[string]any{"response": resp})
}
