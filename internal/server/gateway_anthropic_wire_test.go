package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/ctxd/ctxd/internal/fakemodel"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/tokenizer"
)

func anthropicClient(ts *testServer, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{option.WithBaseURL(ts.URL), option.WithAPIKey("sk-ant-upstream"),
		option.WithMaxRetries(0)}, opts...)...)
}

func TestGatewayAnthropicToolLoopStoredOnce(t *testing.T) {
	t.Parallel()
	calls := 0
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		if r.URL.Path != "/v1/messages" || fakemodel.AnthropicKey(r.Header) != "sk-ant-upstream" || r.Header.Get("Anthropic-Version") == "" {
			http.Error(w, fmt.Sprintf("path %s key %q version %q", r.URL.Path, fakemodel.AnthropicKey(r.Header), r.Header.Get("Anthropic-Version")), 400)
			return
		}
		calls++
		switch calls {
		case 1:
			fakemodel.AnthropicAnswer(w, map[string]any{"type": "text", "text": "I will read it."},
				map[string]any{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": map[string]any{"path": "main.go", "lines": 40}})
		default:
			fakemodel.AnthropicAnswer(w, map[string]any{"type": "text", "text": fmt.Sprintf("answer %d", calls)})
		}
	})
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamAnthropicURL = up.URL })
	client := anthropicClient(ts)
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024,
		System:   []anthropic.TextBlockParam{{Text: "You are a coding agent."}},
		Metadata: anthropic.MetadataParam{UserID: anthropic.String("agent-7")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What does main.go do?"))}}
	res, err := client.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 2 || res.Content[1].Type != "tool_use" {
		t.Fatalf("answer %+v", res.Content)
	}
	// The client sends the tool_use back as it decoded it (its own key
	// order), with the result.
	params.Messages = append(params.Messages,
		anthropic.NewAssistantMessage(anthropic.NewTextBlock(res.Content[0].Text), anthropic.NewToolUseBlock(res.Content[1].ID, res.Content[1].Input, res.Content[1].Name)),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "package main\nfunc main() {}", false)))
	if res, err = client.Messages.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	params.Messages = append(params.Messages, anthropic.NewAssistantMessage(anthropic.NewTextBlock(res.Content[0].Text)),
		anthropic.NewUserMessage(anthropic.NewTextBlock("Thanks.")))
	if res, err = client.Messages.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	if res.Content[0].Text != "answer 3" {
		t.Fatalf("third answer %q", res.Content[0].Text)
	}
	// The window fits: the upstream sees the client's own turns, system
	// prompt included, in order.
	sent := up.Last(t).Body
	if sys, _ := json.Marshal(sent["system"]); !strings.Contains(string(sys), "You are a coding agent.") {
		t.Fatalf("upstream system %s", sys)
	}
	var roles []string
	for _, m := range sent["messages"].([]any) {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if got := strings.Join(roles, ","); got != "user,assistant,user,assistant,user" {
		t.Fatalf("upstream turns %s", got)
	}
	var got []string
	// metadata.user_id with the conversation's identity: the same user's
	// other conversations (side calls, subagents) are other sessions
	for _, m := range ts.allMessages(memory.GatewaySessionID("", "agent-7", "You are a coding agent.", "What does main.go do?")) {
		s := fmt.Sprintf("%v: %v", m.Role, m.Content)
		if len(m.ToolCalls) > 0 {
			fn := m.ToolCalls[0].Function
			s += fmt.Sprintf(" %v(%v)", fn.Name, fn.Arguments)
		}
		got = append(got, s)
	}
	want := []string{"system: You are a coding agent.", "user: What does main.go do?",
		`assistant: I will read it. read_file({"lines":40,"path":"main.go"})`, "tool: package main\nfunc main() {}",
		"assistant: answer 2", "user: Thanks.", "assistant: answer 3"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("stored\n%q\nwant\n%q", got, want)
	}
	// POST /v1/messages is the gateway; /v1/messages/{id} is still a
	// stored message.
	ids := ts.store("plain", msg("user", "hello"))
	ts.call(200, "GET", "/v1/messages/"+ids[0], nil, nil)
}

func TestGatewayAnthropicStream(t *testing.T) {
	t.Parallel()
	firstSeen := make(chan struct{})
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(name string, data map[string]any) {
			b, _ := json.Marshal(data)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
			w.(http.Flusher).Flush()
		}
		event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
			"content": []any{}, "model": "claude-sonnet-4-5", "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 5, "output_tokens": 1}}})
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "Streaming "}})
		select { // the rest once the client has seen the first text
		case <-firstSeen:
		case <-time.After(10 * time.Second):
			return
		}
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "works."}})
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "tool_use", "id": "toolu_9", "name": "run", "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"cmd": "go`}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": ` test"}`}})
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 1})
		event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 9}})
		event("message_stop", map[string]any{"type": "message_stop"})
	})
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamAnthropicURL = up.URL })
	client := anthropicClient(ts, option.WithHeader("X-Ctxd-Session", "an-stream"))
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 512,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("run the tests"))}})
	var acc anthropic.Message
	first := true
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "content_block_delta" && first {
			first = false
			close(firstSeen)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 2 || acc.Content[0].Text != "Streaming works." || acc.Content[1].Name != "run" {
		t.Fatalf("client accumulated %+v", acc.Content)
	}
	msgs := ts.allMessages("an-stream")
	if len(msgs) != 2 {
		t.Fatalf("%d stored, want 2", len(msgs))
	}
	tc := msgs[1].ToolCalls
	if msgs[1].Content != "Streaming works." || len(tc) != 1 || tc[0].Function.Arguments != `{"cmd":"go test"}` {
		t.Fatalf("stored answer %+v", msgs[1])
	}
}

func TestGatewayAnthropicErrors(t *testing.T) {
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		fmt.Fprint(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	})
	t.Setenv("CTXD_UPSTREAM_ANTHROPIC_API_KEY", "sk-ant-env")
	ts := startWithKeys(t, func(c *server.Config) { c.UpstreamAnthropicURL = up.URL })
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	var apiErr *anthropic.Error
	// Without ctxd's key: ctxd's 401.
	noKey := anthropicClient(ts)
	if _, err := noKey.Messages.New(context.Background(), params); !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("err %v, want 401", err)
	}
	keyed := anthropicClient(ts, option.WithHeader("X-Ctxd-Key", keyA))
	_, err := keyed.Messages.New(context.Background(), params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 529 || !strings.Contains(apiErr.Error(), "Overloaded") {
		t.Fatalf("err %v, want the upstream's 529", err)
	}
	if k := fakemodel.AnthropicKey(up.Last(t).Header); k != "sk-ant-upstream" {
		t.Fatalf("upstream x-api-key %q, want the caller's", k)
	}
}

// TestGatewayAnthropicCalibratesToReportedUsage: an upstream whose
// tokenizer counts twice what ctxd's does (reported as usage) gets windows
// that fit its window in its own count.
func TestGatewayAnthropicCalibratesToReportedUsage(t *testing.T) {
	t.Parallel()
	tok := tokenizer.New()
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		raw, _ := json.Marshal(body["messages"])
		n, _ := tok.Count("o200k_base", string(raw))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
			"content": []any{map[string]any{"type": "text", "text": "noted"}}, "stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 2 * n, "output_tokens": 1},
		})
	})
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamAnthropicURL = up.URL })
	const window, answer = 3000, 200
	client := anthropicClient(ts, option.WithHeader("X-Ctxd-Session", "calibrated"), option.WithHeader("X-Ctxd-Context-Window", fmt.Sprint(window)))
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: answer}
	var res *http.Response
	call := func() int {
		t.Helper()
		if _, err := client.Messages.New(context.Background(), params, option.WithResponseInto(&res)); err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(res.Header.Get("X-Ctxd-Tokens"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 40 {
		params.Messages = append(params.Messages,
			anthropic.NewUserMessage(anthropic.NewTextBlock(fmt.Sprintf("Reading %d: %s", i, strings.Repeat(fmt.Sprintf("sensor %d shows %d degrees. ", i, 20+i), 10)))))
		if i == 0 {
			call() // learns the ratio from a small window
		}
		params.Messages = append(params.Messages, anthropic.NewAssistantMessage(anthropic.NewTextBlock("noted")))
	}
	params.Messages = append(params.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock("Which sensor was warmest?")))
	got := call()
	// Uncalibrated, the window would take up to window-answer in ctxd's
	// count: twice what the upstream can hold.
	if limit := (window - answer) / 2; got > limit {
		t.Fatalf("window of %d tokens in ctxd's count, want at most %d (the upstream counts double)", got, limit)
	}
	if got < (window-answer)/4 {
		t.Fatalf("window of %d tokens: calibrated far below what fits", got)
	}
}

func TestGatewayAnthropicFlushTurn(t *testing.T) {
	t.Parallel()
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		if raw, _ := json.Marshal(body["tools"]); strings.Contains(string(raw), `"save_memory"`) {
			fakemodel.AnthropicAnswer(w, map[string]any{"type": "tool_use", "id": "toolu_n", "name": "save_memory", "input": map[string]any{"note": "Staging runs on port 8443."}})
			return
		}
		fakemodel.AnthropicAnswer(w, map[string]any{"type": "text", "text": "carry on"})
	})
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamAnthropicURL = up.URL })
	client := anthropicClient(ts, option.WithHeader("X-Ctxd-Session", "an-flush"), option.WithHeader("X-Ctxd-Context-Window", "2000"))
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100, System: []anthropic.TextBlockParam{{Text: "You run staging."}}}
	for i := range 3 {
		params.Messages = append(params.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(fmt.Sprintf("Log %d: %s", i, strings.Repeat("the staging deploy finished without errors. ", 34)))))
		if i < 2 {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(anthropic.NewTextBlock("ok")))
		}
	}
	res, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Content[0].Text != "carry on" || up.Count() != 2 {
		t.Fatalf("answer %+v after %d upstream requests, want \"carry on\" after the flush turn and the call", res.Content, up.Count())
	}
	turns := up.Requests()[0].Body["messages"].([]any)
	last := turns[len(turns)-1].(map[string]any)
	if raw, _ := json.Marshal(last); last["role"] != "user" || !strings.Contains(string(raw), "save_memory") {
		t.Fatalf("the flush turn ends with %s, want the instruction in the user's turn", raw)
	}
	if sys, _ := json.Marshal(up.Requests()[1].Body["system"]); !strings.Contains(string(sys), "port 8443") || !strings.Contains(string(sys), "You run staging.") {
		t.Fatalf("the call's system prompt %s, want the client's and the saved note", sys)
	}
}

// A system message between the turns (Claude Code sends one on every call)
// is stored as a system message where it stands, marked as a turn's: not
// pinned and not in the system prompt, and sent back upstream as the
// client sent it, at its place.
func TestGatewayAnthropicTurnSystemMessages(t *testing.T) {
	t.Parallel()
	calls := 0
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		calls++
		fakemodel.AnthropicAnswer(w, map[string]any{"type": "text", "text": fmt.Sprintf("answer %d", calls)})
	})
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamAnthropicURL = up.URL })
	ts.Header = http.Header{"X-Ctxd-Session": {"turn-system"}}
	reminder := map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": "Reminder: keep the tests green."}}}
	messages := []any{map[string]any{"role": "user", "content": "Fix the parser."}, reminder}
	call := func() {
		ts.call(200, "POST", "/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024,
			"system": "You are a coding agent.", "messages": messages}, nil)
	}
	call()
	messages = append(messages, map[string]any{"role": "assistant", "content": "answer 1"},
		map[string]any{"role": "user", "content": "And the lexer?"}, reminder)
	call()
	var got []string
	for _, m := range ts.allMessages("turn-system") {
		got = append(got, fmt.Sprintf("%v/%v/%v: %v", m.Role, m.Pinned, m.Metadata[memory.TurnSystemKey], m.Content))
	}
	want := []string{"system/false/<nil>: You are a coding agent.", "user/false/<nil>: Fix the parser.",
		"system/false/true: Reminder: keep the tests green.", "assistant/false/<nil>: answer 1",
		"user/false/<nil>: And the lexer?", "system/false/true: Reminder: keep the tests green.", "assistant/false/<nil>: answer 2"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("stored\n%q\nwant\n%q", got, want)
	}
	sent := up.Last(t).Body
	if sys, _ := json.Marshal(sent["system"]); strings.Contains(string(sys), "Reminder") {
		t.Errorf("the reminder went into the system prompt: %s", sys)
	}
	// the client's turns (a string content goes as its text block, and
	// ctxd places its cache breakpoint)
	var turns []string
	for _, m := range sent["messages"].([]any) {
		tm := m.(map[string]any)
		for _, b := range tm["content"].([]any) {
			turns = append(turns, fmt.Sprintf("%v: %v", tm["role"], b.(map[string]any)["text"]))
		}
	}
	wantTurns := "user: Fix the parser.|system: Reminder: keep the tests green.|assistant: answer 1|user: And the lexer?|system: Reminder: keep the tests green."
	if strings.Join(turns, "|") != wantTurns {
		t.Errorf("upstream turns\n%s\nwant\n%s", strings.Join(turns, "|"), wantTurns)
	}
}
