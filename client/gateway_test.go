package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/memory"
)

// chatUpstream is an OpenAI Chat Completions endpoint: it answers "done",
// streamed when asked, and 429 in OpenAI's shape to a last message "fail";
// it keeps the Authorization each request carried.
type chatUpstream struct {
	mu    sync.Mutex
	auths []string
}

func (u *chatUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.auths = append(u.auths, r.Header.Get("Authorization"))
	u.mu.Unlock()
	switch {
	case req.Messages[len(req.Messages)-1].Content == "fail":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit"}}`)
	case req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range []string{"do", "ne"} {
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`+part+`"}}]}`+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"done"}}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}`)
	}
}

// A model call through the gateway with the typed client: ctxd's key in
// X-Ctxd-Key, the provider's passed on, the upstream's answer (plain,
// streamed, or its error) returned as it came with what ctxd did, and the
// conversation stored in the named session. ctxd's own refusals are
// *client.Error with the API's code.
func TestGatewayCalls(t *testing.T) {
	up := &chatUpstream{}
	ups := httptest.NewServer(up)
	t.Cleanup(ups.Close)
	keys, err := httpapi.ParseKeys("a:key-a-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	url := startServer(t, func(c *server.Config) { c.Keys, c.UpstreamOpenAIURL = keys, ups.URL+"/v1" })
	c := newClient(t, url, client.WithAPIKey("key-a-0123456789"))
	ctx := context.Background()
	body := func(stream bool, msgs ...string) json.RawMessage {
		var m []map[string]string
		for i, s := range msgs {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			m = append(m, map[string]string{"role": role, "content": s})
		}
		b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": m, "stream": stream, "max_tokens": 100})
		return b
	}

	ans, err := c.ChatCompletions(ctx, client.GatewayCall{Session: "gw", ContextWindow: 8000, ProviderKey: "sk-up",
		Body: body(false, "deploy the api")})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(ans.Body)
	ans.Body.Close()
	if err != nil || ans.StatusCode != 200 || !strings.Contains(string(raw), `"content":"done"`) || ans.Session != "gw" ||
		ans.Tokens <= 0 {
		t.Fatalf("answer %d %q, session %q, tokens %d: %v", ans.StatusCode, raw, ans.Session, ans.Tokens, err)
	}

	// A stream, read event by event.
	ans, err = c.ChatCompletions(ctx, client.GatewayCall{Session: "gw", ProviderKey: "sk-up",
		Body: body(true, "deploy the api", "done", "and the worker")})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	sc := bufio.NewScanner(ans.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	ans.Body.Close()
	if ct := ans.Header.Get("Content-Type"); len(events) != 3 || events[2] != "[DONE]" || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("stream %q (%s)", events, ct)
	}

	// The upstream's own error is an answer, in its own shape.
	ans, err = c.ChatCompletions(ctx, client.GatewayCall{Session: "gw", ProviderKey: "sk-up",
		Body: body(false, "deploy the api", "done", "and the worker", "done", "fail")})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = io.ReadAll(ans.Body)
	ans.Body.Close()
	if ans.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(raw), "slow down") {
		t.Fatalf("upstream error: %d %q", ans.StatusCode, raw)
	}

	up.mu.Lock()
	auths := append([]string(nil), up.auths...)
	up.mu.Unlock()
	for _, a := range auths {
		if a != "Bearer sk-up" {
			t.Errorf("the upstream got Authorization %q, want the provider's key", a)
		}
	}
	var contents []string
	for m, err := range c.Messages(ctx, "gw", nil, 100) {
		if err != nil {
			t.Fatal(err)
		}
		contents = append(contents, m.Content)
	}
	if want := []string{"deploy the api", "done", "and the worker", "done", "fail"}; strings.Join(contents, "|") != strings.Join(want, "|") {
		t.Errorf("stored %q, want %q", contents, want)
	}

	// ctxd's own refusals: no Anthropic upstream, a bad window, a bad body,
	// a wrong key.
	_, err = c.AnthropicMessages(ctx, client.GatewayCall{Body: json.RawMessage(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)})
	wantCode(t, err, http.StatusNotFound, memory.ENOTFOUND)
	_, err = c.ChatCompletions(ctx, client.GatewayCall{ContextWindow: 5, Body: body(false, "hi")})
	wantCode(t, err, http.StatusBadRequest, memory.EINVALID)
	if _, err = c.ChatCompletions(ctx, client.GatewayCall{Body: json.RawMessage(`{"model":`)}); err == nil {
		t.Error("a body that is not JSON was sent")
	}
	_, err = newClient(t, url, client.WithAPIKey("wrong-key-0123456789")).ChatCompletions(ctx, client.GatewayCall{Body: body(false, "hi")})
	wantCode(t, err, http.StatusUnauthorized, memory.EUNAUTHORIZED)
}
