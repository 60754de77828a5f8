package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/fakemodel"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/tokenizer"
	openai "github.com/sashabaranov/go-openai"
)

// echoUpstream answers "answer N" to the Nth request.
func echoUpstream(t *testing.T) *fakemodel.Recorder {
	var n int
	var mu sync.Mutex
	return fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		fakemodel.OpenAIAnswer(w, "answer "+strconv.Itoa(i))
	})
}

func TestGatewayOpenAIStoresResentHistoryOnce(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	client, doer := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", nil)
	ctx := context.Background()
	history := []openai.ChatCompletionMessage{{Role: "system", Content: "You are terse."}}
	session := ""
	for i := 1; i <= 3; i++ {
		history = append(history, openai.ChatCompletionMessage{Role: "user", Content: fmt.Sprintf("question %d", i)})
		res, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "gpt-4o", Messages: history})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got, want := res.Choices[0].Message.Content, fmt.Sprintf("answer %d", i); got != want {
			t.Fatalf("call %d answered %q, want %q", i, got, want)
		}
		// No X-Ctxd-Session and no user: the session is named by a hash
		// of the system prompt and the first user message, the same on
		// every call.
		got := doer.Last.Header.Get("X-Ctxd-Session")
		if got == "" || (session != "" && got != session) {
			t.Fatalf("call %d: X-Ctxd-Session %q, the first call's %q", i, got, session)
		}
		session = got
		if n, err := strconv.Atoi(doer.Last.Header.Get("X-Ctxd-Tokens")); err != nil || n <= 0 {
			t.Fatalf("call %d: X-Ctxd-Tokens %q", i, doer.Last.Header.Get("X-Ctxd-Tokens"))
		}
		// The window fits whole: the upstream sees the history as sent.
		var want []string
		for _, m := range history {
			want = append(want, m.Role+": "+m.Content)
		}
		if got := up.Last(t).Contents(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("call %d: upstream got %q, want %q", i, got, want)
		}
		if key := up.Last(t).Body["prompt_cache_key"]; key != "ctxd-"+session {
			t.Fatalf("call %d: prompt_cache_key %v, want the session's", i, key)
		}
		if auth := up.Last(t).Header.Get("Authorization"); auth != "Bearer sk-upstream" {
			t.Fatalf("upstream Authorization %q, want the caller's", auth)
		}
		history = append(history, res.Choices[0].Message)
	}
	// No X-Ctxd-Context-Window: gpt-4o's 128k capped to the gateway's
	// default, so ctxd keeps the window rather than passing it through.
	if w := ts.session(session).ContextWindow; w != 64_000 {
		t.Fatalf("context_window %v, want 64000", w)
	}
	msgs := ts.allMessages(session)
	var got []string
	for _, m := range msgs {
		got = append(got, fmt.Sprintf("%v: %v", m.Role, m.Content))
	}
	want := "system: You are terse.|user: question 1|assistant: answer 1|user: question 2|assistant: answer 2|user: question 3|assistant: answer 3"
	if strings.Join(got, "|") != want {
		t.Fatalf("stored %q,\nwant %q", got, want)
	}
}

func TestGatewayOpenAIDivergedHistorySupersedesTail(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	client, _ := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", http.Header{"X-Ctxd-Session": {"edit-1"}})
	ctx := context.Background()
	call := func(msgs ...openai.ChatCompletionMessage) openai.ChatCompletionMessage {
		t.Helper()
		res, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "gpt-4o", Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		return res.Choices[0].Message
	}
	u1 := openai.ChatCompletionMessage{Role: "user", Content: "first question"}
	a1 := call(u1)
	u2 := openai.ChatCompletionMessage{Role: "user", Content: "second question, with a typo"}
	call(u1, a1, u2) // stores u2 and "answer 2"
	// The user edits the second question: the client resends the history
	// up to a1 and the edited question.
	u2e := openai.ChatCompletionMessage{Role: "user", Content: "second question, edited"}
	call(u1, a1, u2e)
	if got, want := strings.Join(up.Last(t).Contents(), "|"), "user: first question|assistant: answer 1|user: second question, edited"; got != want {
		t.Fatalf("upstream got %q, want %q (the superseded tail must not be in the window)", got, want)
	}
	var active, superseded []string
	for _, m := range ts.allMessages("edit-1") {
		if m.State == "dropped" {
			superseded = append(superseded, m.Content)
		} else {
			active = append(active, m.Content)
		}
	}
	if got, want := strings.Join(active, "|"), "first question|answer 1|second question, edited|answer 3"; got != want {
		t.Fatalf("active %q, want %q", got, want)
	}
	if got, want := strings.Join(superseded, "|"), "second question, with a typo|answer 2"; got != want {
		t.Fatalf("superseded %q, want %q", got, want)
	}
	for _, c := range ts.cold("edit-1", "") {
		if r := c.DropReason; r != "superseded" {
			t.Fatalf("cold chunk's drop_reason %v, want superseded", r)
		}
	}
	// An agent that rewrites its system prompt replaces the stored prompt,
	// not the conversation after it.
	sys1 := openai.ChatCompletionMessage{Role: "system", Content: "Today is Monday."}
	call(sys1, u1, a1, u2e)
	sys2 := openai.ChatCompletionMessage{Role: "system", Content: "Today is Tuesday."}
	call(sys2, u1, a1, u2e)
	if got, want := strings.Join(up.Last(t).Contents(), "|"), "system: Today is Tuesday.|user: first question|assistant: answer 1|user: second question, edited"; got != want {
		t.Fatalf("upstream got %q, want %q", got, want)
	}
	var dropped []string
	for _, m := range ts.allMessages("edit-1") {
		if m.State == "dropped" {
			dropped = append(dropped, m.Content)
		}
	}
	// answer 3, answer 4: regenerated answers the client did not keep
	if got, want := strings.Join(dropped, "|"), "second question, with a typo|answer 2|answer 3|Today is Monday.|answer 4"; got != want {
		t.Fatalf("superseded %q, want %q", got, want)
	}
	// Resending the edited history stores nothing new.
	before := len(ts.allMessages("edit-1"))
	call(sys2, u1, a1, u2e, openai.ChatCompletionMessage{Role: "assistant", Content: "answer 5"}, openai.ChatCompletionMessage{Role: "user", Content: "thanks"})
	if got := len(ts.allMessages("edit-1")); got != before+2 {
		t.Fatalf("%d messages after one more turn, want %d", got, before+2)
	}
}

func TestGatewayOpenAIWindowFitsModel(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	const window, answer = 2000, 300
	client, doer := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", http.Header{"X-Ctxd-Session": {"long-1"}, "X-Ctxd-Context-Window": {strconv.Itoa(window)}})
	history := []openai.ChatCompletionMessage{{Role: "system", Content: "You answer questions about the log."}}
	for i := range 30 {
		history = append(history,
			openai.ChatCompletionMessage{Role: "user", Content: fmt.Sprintf("Entry %d: %s", i, strings.Repeat(fmt.Sprintf("the pump at station %d reported pressure %d. ", i, 100+i), 8))},
			openai.ChatCompletionMessage{Role: "assistant", Content: fmt.Sprintf("Noted entry %d.", i)})
	}
	history = append(history, openai.ChatCompletionMessage{Role: "user", Content: "What did station 3 report?"})
	res, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "gpt-4o", Messages: history, MaxCompletionTokens: answer})
	if err != nil {
		t.Fatal(err)
	}
	sent := up.Last(t)
	tok := tokenizer.New()
	total := 0
	for _, m := range sent.Contents() {
		n, err := tok.Count("o200k_base", m)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total > window-answer {
		t.Fatalf("the upstream got %d tokens of content, over the window %d less the answer's %d", total, window, answer)
	}
	got := sent.Contents()
	if len(got) >= len(history) || got[len(got)-1] != "user: What did station 3 report?" || got[0] != "system: You answer questions about the log." {
		t.Fatalf("upstream window of %d messages (history %d): first %q, last %q", len(got), len(history), got[0], got[len(got)-1])
	}
	if n, _ := strconv.Atoi(doer.Last.Header.Get("X-Ctxd-Tokens")); n <= 0 || n > window-answer {
		t.Fatalf("X-Ctxd-Tokens %q, want 1..%d", doer.Last.Header.Get("X-Ctxd-Tokens"), window-answer)
	}
	msgs := ts.allMessages("long-1")
	if last := msgs[len(msgs)-1]; last.Content != res.Choices[0].Message.Content || last.Role != "assistant" {
		t.Fatalf("newest stored message %v, want the answer %q", last, res.Choices[0].Message.Content)
	}
	originals := 0
	for _, m := range msgs {
		if m.Kind != "summary" {
			originals++
		}
	}
	if originals != len(history)+1 {
		t.Fatalf("%d messages stored, want %d", originals, len(history)+1)
	}
}

func TestGatewayOpenAIStreamPassesThroughAndStores(t *testing.T) {
	t.Parallel()
	firstSeen := make(chan struct{})
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		fakemodel.ChatChunk(w, fakemodel.DeltaChunk(map[string]any{"role": "assistant", "content": "Let me "}))
		// The rest waits until the client has read the first chunk: a
		// gateway that buffered the answer would never pass it on.
		select {
		case <-firstSeen:
		case <-time.After(10 * time.Second):
			return
		}
		fakemodel.ChatChunk(w, fakemodel.DeltaChunk(map[string]any{"content": "check."}))
		fakemodel.ChatChunk(w, fakemodel.DeltaChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
			"function": map[string]any{"name": "read_file", "arguments": `{"path":`}}}}))
		fakemodel.ChatChunk(w, fakemodel.DeltaChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `"main.go"}`}}}}))
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	client, _ := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", http.Header{"X-Ctxd-Session": {"stream-1"}})
	stream, err := client.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{Model: "gpt-4o", Stream: true,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "fix main.go"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var text strings.Builder
	args := ""
	for i := 0; ; i++ {
		ch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			close(firstSeen)
		}
		text.WriteString(ch.Choices[0].Delta.Content)
		for _, tc := range ch.Choices[0].Delta.ToolCalls {
			args += tc.Function.Arguments
		}
	}
	if text.String() != "Let me check." || args != `{"path":"main.go"}` {
		t.Fatalf("client got text %q args %q", text.String(), args)
	}
	msgs := ts.allMessages("stream-1")
	if len(msgs) != 2 {
		t.Fatalf("%d messages stored, want the question and the answer", len(msgs))
	}
	ans := msgs[1]
	calls := ans.ToolCalls
	if ans.Content != "Let me check." || len(calls) != 1 {
		t.Fatalf("stored answer %+v", ans)
	}
	fn := calls[0].Function
	if calls[0].ID != "call_1" || fn.Name != "read_file" || fn.Arguments != `{"path":"main.go"}` {
		t.Fatalf("stored tool call %v", calls[0])
	}
}

func TestGatewayOpenAIStreamStoredWhenClientLeaves(t *testing.T) {
	t.Parallel()
	firstSeen := make(chan struct{})
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		fakemodel.ChatChunk(w, fakemodel.DeltaChunk(map[string]any{"role": "assistant", "content": "partial answer"}))
		<-firstSeen
		// The client is gone: ctxd cancels this request.
		<-r.Context().Done()
	})
	dir := t.TempDir()
	ts := startServer(t, dir, func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	client, _ := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", http.Header{"X-Ctxd-Session": {"leave-1"}})
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{Model: "gpt-4o", Stream: true,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "explain"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	close(firstSeen)
	cancel()
	stream.Close()
	// Closing the server waits for its requests in flight: the handler has
	// stored what it streamed by the time it returns.
	ts.Stop()
	ts = startServer(t, dir)
	msgs := ts.allMessages("leave-1")
	if len(msgs) != 2 || msgs[1].Content != "partial answer" {
		t.Fatalf("stored %v, want the question and the partial answer", msgs)
	}
}

func TestGatewayOpenAIUpstreamErrors(t *testing.T) {
	t.Parallel()
	t.Run("PassThrough", func(t *testing.T) {
		t.Parallel()
		up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)
		})
		ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
		client, _ := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", http.Header{"X-Ctxd-Session": {"err-1"}})
		_, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 429 || apiErr.Message != "slow down" {
			t.Fatalf("err %v, want the upstream's 429 slow down", err)
		}
		if up.Count() != 1 {
			t.Fatalf("%d upstream requests, want 1 (only overflows are retried)", up.Count())
		}
		// The question is stored; no answer is.
		if msgs := ts.allMessages("err-1"); len(msgs) != 1 {
			t.Fatalf("%d messages stored, want 1", len(msgs))
		}
	})
	t.Run("OverflowRetriedSmaller", func(t *testing.T) {
		t.Parallel()
		var upstreamCalls atomic.Int32
		up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
			if up := upstreamCalls.Add(1); up == 1 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error":{"message":"This model's maximum context length is 1000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`)
				return
			}
			fakemodel.OpenAIAnswer(w, "fits now")
		})
		ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
		client, doer := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", http.Header{"X-Ctxd-Session": {"over-1"}, "X-Ctxd-Context-Window": {"4000"}})
		var history []openai.ChatCompletionMessage
		for i := range 24 {
			history = append(history, openai.ChatCompletionMessage{Role: "user", Content: fmt.Sprintf("note %d: %s", i, strings.Repeat(fmt.Sprintf("valve %d settings and readings ", i), 40))},
				openai.ChatCompletionMessage{Role: "assistant", Content: fmt.Sprintf("ok %d", i)})
		}
		history = append(history, openai.ChatCompletionMessage{Role: "user", Content: "summarise the valve notes"})
		res, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "gpt-4o", Messages: history, MaxCompletionTokens: 200})
		if err != nil {
			t.Fatalf("err %v, want the retry's answer", err)
		}
		if res.Choices[0].Message.Content != "fits now" || up.Count() != 2 {
			t.Fatalf("answer %q after %d upstream requests, want \"fits now\" after 2", res.Choices[0].Message.Content, up.Count())
		}
		first, second := len(up.Requests()[0].Body["messages"].([]any)), len(up.Requests()[1].Body["messages"].([]any))
		if second >= first {
			t.Fatalf("the retry sent %d messages, the refused request %d: want fewer", second, first)
		}
		if doer.Last.Header.Get("X-Ctxd-Compacted") != "true" {
			t.Fatalf("X-Ctxd-Compacted %q, want true", doer.Last.Header.Get("X-Ctxd-Compacted"))
		}
	})
}

func TestGatewayOpenAIKeysAndTenants(t *testing.T) {
	up := echoUpstream(t)
	t.Setenv("CTXD_UPSTREAM_OPENAI_API_KEY", "sk-from-env")
	ts := startWithKeys(t, func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	req := openai.ChatCompletionRequest{Model: "gpt-4o", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hello"}}}
	// Without ctxd's key: 401, and nothing reaches the upstream.
	client, _ := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", http.Header{"X-Ctxd-Session": {"keyed"}})
	var apiErr *openai.APIError
	if _, err := client.CreateChatCompletion(context.Background(), req); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 {
		t.Fatalf("err %v, want 401", err)
	}
	// The provider's key in Authorization is not ctxd's.
	client, _ = fakemodel.OpenAIClient(ts.URL+"/v1", keyA, http.Header{"X-Ctxd-Session": {"keyed"}})
	if _, err := client.CreateChatCompletion(context.Background(), req); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 {
		t.Fatalf("err %v, want 401", err)
	}
	if up.Count() != 0 {
		t.Fatalf("%d upstream requests from refused calls", up.Count())
	}
	client, _ = fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", http.Header{"X-Ctxd-Session": {"keyed"}, "X-Ctxd-Key": {keyA}})
	if _, err := client.CreateChatCompletion(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if auth := up.Last(t).Header.Get("Authorization"); auth != "Bearer sk-upstream" {
		t.Fatalf("upstream Authorization %q, want the caller's", auth)
	}
	// No provider key from the caller: the configured one.
	client, _ = fakemodel.OpenAIClient(ts.URL+"/v1", "", http.Header{"X-Ctxd-Session": {"keyed"}, "X-Ctxd-Key": {keyA}})
	if _, err := client.CreateChatCompletion(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if auth := up.Last(t).Header.Get("Authorization"); auth != "Bearer sk-from-env" {
		t.Fatalf("upstream Authorization %q, want the configured key", auth)
	}
	// The session is the tenant's: another tenant does not see it.
	ts.as(keyA).call(200, "GET", "/v1/sessions/keyed", nil, nil)
	ts.as(keyB).call(404, "GET", "/v1/sessions/keyed", nil, nil)
}

func TestGatewayOpenAIFlushTurn(t *testing.T) {
	t.Parallel()
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		raw, _ := json.Marshal(body["tools"])
		if strings.Contains(string(raw), `"save_memory"`) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "model": "gpt-4o",
				"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{"role": "assistant", "content": nil,
					"tool_calls": []any{map[string]any{"id": "call_n", "type": "function",
						"function": map[string]any{"name": "save_memory", "arguments": `{"note":"The deploy key lives at vault path secret/deploy-7."}`}}}}}}})
			return
		}
		fakemodel.OpenAIAnswer(w, "carry on")
	})
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	client, _ := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", http.Header{"X-Ctxd-Session": {"flush-1"}, "X-Ctxd-Context-Window": {"2000"}})
	tools := []openai.Tool{{Type: "function", Function: &openai.FunctionDefinition{Name: "run", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	history := []openai.ChatCompletionMessage{{Role: "system", Content: "You deploy services."}}
	call := func() {
		t.Helper()
		res, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "gpt-4o", Messages: history, Tools: tools, MaxCompletionTokens: 100})
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].Message.Content != "carry on" {
			t.Fatalf("the client got %+v, want the answer to its own call", res.Choices[0].Message)
		}
		history = append(history, res.Choices[0].Message)
	}
	// A short session: no flush turn.
	history = append(history, openai.ChatCompletionMessage{Role: "user", Content: "hello"})
	call()
	if up.Count() != 1 {
		t.Fatalf("%d upstream requests for a short session, want 1", up.Count())
	}
	// Near the compaction trigger (half of 2,000, flush_due 250 before it).
	// Each note under a quarter of the window: a larger message counts as
	// its cut view.
	for i := range 3 {
		history = append(history, openai.ChatCompletionMessage{Role: "user", Content: fmt.Sprintf("Deploy notes %d: %s", i, strings.Repeat("the service restarts cleanly after the key rotation. ", 25))})
		if i < 2 {
			history = append(history, openai.ChatCompletionMessage{Role: "assistant", Content: "ok"})
		}
	}
	call()
	if up.Count() != 3 {
		t.Fatalf("%d upstream requests, want 3 (the flush turn, then the call); session %+v", up.Count(), ts.session("flush-1"))
	}
	flush, real := up.Requests()[1], up.Requests()[2]
	if got := flush.Contents(); !strings.Contains(got[len(got)-1], "save_memory") {
		t.Fatalf("the flush turn's last message %q, want the flush instruction", got[len(got)-1])
	}
	if raw, _ := json.Marshal(flush.Body["tools"]); !strings.Contains(string(raw), `"run"`) || flush.Body["stream"] != nil {
		t.Fatalf("the flush turn's tools %s (want the agent's and save_memory), stream %v", raw, flush.Body["stream"])
	}
	if raw, _ := json.Marshal(real.Body["tools"]); strings.Contains(string(raw), "save_memory") {
		t.Fatalf("the client's call went with ctxd's tool: %s", raw)
	}
	if got := strings.Join(real.Contents(), "|"); !strings.Contains(got, "secret/deploy-7") || strings.Contains(got, "about to be compacted") {
		t.Fatalf("the client's call went with %q: want the saved note, not the flush turn", got)
	}
	var notes, conversation []string
	for _, m := range ts.allMessages("flush-1") {
		if m.Kind == "summary" {
			continue
		}
		if m.Metadata["ctxd_note"] == true {
			if !m.Pinned {
				t.Fatalf("note %v is not pinned", m)
			}
			notes = append(notes, m.Content)
			continue
		}
		conversation = append(conversation, m.Content)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "secret/deploy-7") {
		t.Fatalf("notes %q", notes)
	}
	if len(conversation) != len(history) {
		t.Fatalf("%d conversation messages stored, want %d (the flush turn is not conversation)", len(conversation), len(history))
	}
	// Once per compaction cycle: the next call has no flush turn.
	history = append(history, openai.ChatCompletionMessage{Role: "user", Content: "next step"})
	call()
	if up.Count() != 4 {
		t.Fatalf("%d upstream requests, want 4 (no second flush turn this cycle)", up.Count())
	}
}
