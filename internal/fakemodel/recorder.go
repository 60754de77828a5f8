package fakemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// Recorder is a model API on loopback that records what it is sent and
// answers as the test's reply says: for the gateway's rules, where a test
// scripts each answer, unlike Model's task. It serves the tests of
// internal/server and the process-level ones of cmd/ctxd alike.
type Recorder struct {
	*httptest.Server
	mu       sync.Mutex
	requests []Request
	reply    func(w http.ResponseWriter, r *http.Request, body map[string]any)
}

// Request is one request a Recorder got.
type Request struct {
	Header http.Header
	Body   map[string]any
	Raw    []byte // the body as sent
	Query  string
}

// NewRecorder starts a Recorder, closed when the test ends. A body that is
// not JSON is refused 400, as the providers refuse it.
func NewRecorder(tb testing.TB, reply func(w http.ResponseWriter, r *http.Request, body map[string]any)) *Recorder {
	tb.Helper()
	u := &Recorder{reply: reply}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, "not JSON: "+err.Error(), 400)
			return
		}
		u.mu.Lock()
		u.requests = append(u.requests, Request{Header: r.Header.Clone(), Body: body, Raw: raw, Query: r.URL.RawQuery})
		u.mu.Unlock()
		u.reply(w, r, body)
	}))
	tb.Cleanup(u.Close)
	return u
}

// Last is the latest request; the test fails if there is none.
func (u *Recorder) Last(tb testing.TB) Request {
	tb.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.requests) == 0 {
		tb.Fatal("the upstream got no request")
	}
	return u.requests[len(u.requests)-1]
}

// Count is how many requests the Recorder got.
func (u *Recorder) Count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.requests)
}

// Requests lists the requests got so far, oldest first.
func (u *Recorder) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Request(nil), u.requests...)
}

// Contents lists a Chat Completions request's messages as "role: content".
func (r Request) Contents() []string {
	var out []string
	msgs, _ := r.Body["messages"].([]any)
	for _, m := range msgs {
		mm := m.(map[string]any)
		c, _ := mm["content"].(string)
		out = append(out, fmt.Sprintf("%v: %s", mm["role"], c))
	}
	return out
}

// OpenAIAnswer answers a Chat Completions request with text.
func OpenAIAnswer(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
	})
}

// ChatChunk writes one Chat Completions stream chunk.
func ChatChunk(w http.ResponseWriter, chunk any) {
	b, _ := json.Marshal(chunk)
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

// DeltaChunk is a Chat Completions stream chunk carrying delta.
func DeltaChunk(delta map[string]any) map[string]any {
	return map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
		"choices": []any{map[string]any{"index": 0, "delta": delta}}}
}

// AnthropicAnswer answers a Messages request with content blocks.
func AnthropicAnswer(w http.ResponseWriter, blocks ...map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": blocks,
		"stop_reason": "end_turn", "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 3},
	})
}

// AnthropicKey is the key a request carries: x-api-key, or a bearer token
// (the SDK's v2 sends its API key that way).
func AnthropicKey(h http.Header) string {
	if k := h.Get("X-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
}

// HeaderDoer adds headers to every request of an SDK client and keeps the
// latest answer, for the headers ctxd sets on it.
type HeaderDoer struct {
	H    http.Header
	Last *http.Response
}

func (d *HeaderDoer) Do(r *http.Request) (*http.Response, error) {
	for k, v := range d.H {
		r.Header[k] = v
	}
	res, err := http.DefaultClient.Do(r)
	d.Last = res
	return res, err
}

// OpenAIClient is an SDK client of the Chat Completions API at baseURL
// that sends h on every request.
func OpenAIClient(baseURL, key string, h http.Header) (*openai.Client, *HeaderDoer) {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = baseURL
	d := &HeaderDoer{H: h}
	cfg.HTTPClient = d
	return openai.NewClientWithConfig(cfg), d
}

// Post sends body as JSON to url and answers the status, headers and body.
func Post(tb testing.TB, url string, h http.Header, body any) (int, http.Header, []byte) {
	tb.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, out
}
