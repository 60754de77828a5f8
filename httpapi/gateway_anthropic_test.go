package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// A mid-conversation system turn stands only right after a user turn: one
// whose user turn the window dropped becomes a user turn merged with its
// neighbours, and the breakpoint places follow the blocks.
func TestPlaceSystemTurns(t *testing.T) {
	turn := func(role string, texts ...string) anthropicTurn {
		tt := anthropicTurn{Role: role}
		for _, s := range texts {
			b, _ := json.Marshal(anthropicBlock{Type: "text", Text: s})
			tt.Content = append(tt.Content, b)
		}
		return tt
	}
	show := func(turns []anthropicTurn) string {
		var parts []string
		for _, t := range turns {
			var texts []string
			for _, b := range t.Content {
				var ab anthropicBlock
				_ = json.Unmarshal(b, &ab)
				texts = append(texts, ab.Text)
			}
			parts = append(parts, t.Role+":"+strings.Join(texts, ","))
		}
		return strings.Join(parts, " ")
	}
	for _, c := range []struct {
		name  string
		turns []anthropicTurn
		at    [][2]int
		want  string
		wantA [][2]int
	}{
		{"after a user turn: kept", []anthropicTurn{turn("user", "u1"), turn("system", "s1"), turn("assistant", "a1")},
			[][2]int{{0, 0}, {1, 0}, {2, 0}}, "user:u1 system:s1 assistant:a1", [][2]int{{0, 0}, {1, 0}, {2, 0}}},
		{"first: a user turn", []anthropicTurn{turn("system", "s1"), turn("assistant", "a1")},
			[][2]int{{0, 0}, {1, 0}}, "user:s1 assistant:a1", [][2]int{{0, 0}, {1, 0}}},
		{"after an assistant turn: merged into the next user turn", []anthropicTurn{turn("user", "u1"), turn("assistant", "a1"), turn("system", "s1"), turn("user", "u2", "u3")},
			[][2]int{{0, 0}, {1, 0}, {2, 0}, {3, 1}}, "user:u1 assistant:a1 user:s1,u2,u3", [][2]int{{0, 0}, {1, 0}, {2, 0}, {2, 2}}},
		{"a later turn moves up", []anthropicTurn{turn("user", "u1"), turn("assistant", "a1"), turn("system", "s1"), turn("assistant", "a2"), turn("user", "u2")},
			[][2]int{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {-1, -1}}, "user:u1 assistant:a1 user:s1 assistant:a2 user:u2", [][2]int{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {-1, -1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := placeSystemTurns(c.turns, c.at)
			if show(got) != c.want {
				t.Errorf("turns %s, want %s", show(got), c.want)
			}
			for i := range c.at {
				if c.at[i] != c.wantA[i] {
					t.Errorf("at %v, want %v", c.at, c.wantA)
					break
				}
			}
		})
	}
}

// A summary is the assistant's: a window that puts one right before the
// final assistant turn merges the two, and the merged turn must still
// start with that turn's thinking block, as the API requires.
func TestAnthropicSummaryBeforeThinkingTurn(t *testing.T) {
	msgs := []json.RawMessage{
		json.RawMessage(`{"role":"user","content":"read the files"}`),
		json.RawMessage(`{"role":"assistant","content":[{"type":"thinking","thinking":"next: read","signature":"sig"},{"type":"tool_use","id":"t1","name":"Read","input":{"path":"a"}}]}`),
		json.RawMessage(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a's text"}]}`),
	}
	f := &anthropicFormat{raw: map[string]json.RawMessage{"model": json.RawMessage(`"m"`), "max_tokens": json.RawMessage(`1000`)},
		messages: msgs, origin: []int{0, 1, 2}, parts: []int{1, 1, 1}, thinking: []bool{false, true, false}}
	win := &memory.GatewayWindow{Answer: 1000}
	add := func(m *memory.Message, client int) {
		win.Messages = append(win.Messages, memory.GatewayMessage{WindowMessage: memory.WindowMessage{Message: m}, Client: client, Origin: client})
	}
	add(&memory.Message{Role: memory.RoleUser, Content: "read the files"}, 0)
	add(&memory.Message{Role: memory.RoleAssistant, Kind: memory.KindSummary, Content: "Summary of 4 messages"}, -1)
	add(&memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "t1", Type: "function", Function: memory.FunctionCall{Name: "Read", Arguments: `{"path":"a"}`}}}}, 1)
	add(&memory.Message{Role: memory.RoleTool, ToolCallID: "t1", Content: "a's text"}, 2)
	body, err := f.body(win)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	var shape []string
	for _, m := range out.Messages {
		var types []string
		for _, b := range m.Content {
			types = append(types, b.Type)
		}
		shape = append(shape, m.Role+":"+strings.Join(types, ","))
	}
	if got, want := strings.Join(shape, " "), "user:text assistant:thinking,text,tool_use user:tool_result"; got != want {
		t.Fatalf("messages %s, want %s", got, want)
	}
}

// An upstream's answer that the prompt was too long, in each provider's
// wording, is retried with a smaller window; other refusals are not.
func TestIsOverflow(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   bool
	}{
		{400, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9013 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, true},
		{400, `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`, true},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210344 tokens > 200000 maximum"}}`, true},
		{400, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again\"}}", true},
		{413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, true},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\""}}`, false},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, false},
		{500, `{"type":"error","error":{"type":"api_error","message":"prompt is too long"}}`, false},
	} {
		if got := isOverflow(c.status, []byte(c.body)); got != c.want {
			t.Errorf("isOverflow(%d, %s) = %v, want %v", c.status, c.body, got, c.want)
		}
	}
}
