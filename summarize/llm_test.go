package summarize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// chatRequest is the part of the wire request the tests look at.
type chatRequest struct {
	Model       string   `json:"model"`
	Temperature *float64 `json:"temperature"`
	MaxTokens   int      `json:"max_tokens"`
	Messages    []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func (r chatRequest) user() string { return r.Messages[len(r.Messages)-1].Content }

// fakeLLM is an OpenAI-compatible chat-completions server. answer decides
// each reply from the call's number (from 1) and request.
type fakeLLM struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []chatRequest
	answer func(n int, r chatRequest) (status int, content string)
	delay  time.Duration
}

func newFakeLLM(t *testing.T, answer func(n int, r chatRequest) (int, string)) *fakeLLM {
	f := &fakeLLM{answer: answer}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		var req chatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		n := len(f.reqs)
		f.mu.Unlock()
		if f.delay > 0 {
			select {
			case <-time.After(f.delay):
			case <-r.Context().Done():
				return
			}
		}
		status, content := f.answer(n, req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status != http.StatusOK {
			fmt.Fprintf(w, `{"error":{"message":%q,"type":"server_error"}}`, content)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1767348000, "model": req.Model,
			"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
		})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeLLM) calls() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.reqs...)
}

func newLLM(t *testing.T, f *fakeLLM, cfg LLMConfig, fallback memory.Summarizer) *LLM {
	t.Helper()
	cfg.BaseURL = f.URL + "/v1"
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	l, err := NewLLM(cfg, testTokenizer(t), fallback)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func llmSummarize(t *testing.T, l *LLM, msgs []*memory.Message, target int) memory.Summary {
	t.Helper()
	s, err := l.Summarize(context.Background(), memory.SummaryRequest{Messages: msgs, TargetTokens: target, Encoding: enc, Prompt: "fix the compaction test"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const goodAnswer = "user: memory/compact.go drops messages past 80% of max_window_tokens; decided: keep pinned messages.\nalice: TODO fix PROJ-481 before 2026-01-15; must not change the on-disk format."

func TestLLMHappyPath(t *testing.T) {
	f := newFakeLLM(t, func(int, chatRequest) (int, string) { return 200, "Here is the summary:\n" + goodAnswer })
	s := llmSummarize(t, newLLM(t, f, LLMConfig{}, nil), conversation(), 200)
	if s.Method != memory.SummaryLLM || s.Note != "" || s.Text != goodAnswer {
		t.Fatalf("got %+v", s)
	}
	calls := f.calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	r := calls[0]
	if r.Model != "test-model" || r.Temperature == nil || *r.Temperature < 0.05 || r.MaxTokens < 200 {
		t.Errorf("model %q temperature %v max_tokens %d", r.Model, r.Temperature, r.MaxTokens)
	}
	if len(r.Messages) != 2 || r.Messages[0].Role != "system" || !strings.Contains(r.Messages[0].Content, "identifiers") {
		t.Errorf("system prompt: %+v", r.Messages)
	}
	for _, want := range []string{"at most 200 tokens", "10 messages, 2026-01-02 10:00 – 10:09 UTC", "fix the compaction test",
		"alice: TODO: we need to fix PROJ-481", "assistant: read_file({\"path\": \"memory/compact.go\"})"} {
		if !strings.Contains(r.user(), want) {
			t.Errorf("user prompt lacks %q:\n%s", want, r.user())
		}
	}
}

func TestLLMReasoningModelOmitsSampling(t *testing.T) {
	f := newFakeLLM(t, func(int, chatRequest) (int, string) { return 200, goodAnswer })
	s := llmSummarize(t, newLLM(t, f, LLMConfig{Model: "o3-mini"}, nil), conversation(), 200)
	if r := f.calls()[0]; s.Method != memory.SummaryLLM || r.Temperature != nil || r.MaxTokens != 0 {
		t.Errorf("method %s temperature %v max_tokens %d", s.Method, r.Temperature, r.MaxTokens)
	}
}

func TestLLMStaged(t *testing.T) {
	f := newFakeLLM(t, func(n int, r chatRequest) (int, string) {
		if strings.Contains(r.user(), "Merge them") {
			return 200, "merged: " + goodAnswer
		}
		return 200, fmt.Sprintf("part summary %d: decided X", n)
	})
	msgs := benchMessages(60) // ~5,000 tokens
	l := newLLM(t, f, LLMConfig{MaxInputTokens: 1200}, nil)
	s := llmSummarize(t, l, msgs, 300)
	if s.Method != memory.SummaryLLM || s.Text != "merged: "+goodAnswer {
		t.Fatalf("got %+v", s)
	}
	calls := f.calls()
	parts := 0
	for _, c := range calls {
		if strings.Contains(c.user(), "This is part ") {
			parts++
			if n := count(t, c.Messages[0].Content) + count(t, c.user()); n > 1200 {
				t.Errorf("part call of %d tokens", n)
			}
		}
	}
	last := calls[len(calls)-1].user()
	if parts < 4 || len(calls) != parts+1 || !strings.Contains(last, "Merge them") {
		t.Fatalf("%d calls, %d parts; last:\n%s", len(calls), parts, last)
	}
	for i := 1; i <= parts; i++ {
		if !strings.Contains(last, fmt.Sprintf("Part %d of %d:\npart summary", i, parts)) {
			t.Errorf("merge input lacks part %d:\n%s", i, last)
		}
	}
	// Every message reached some part.
	var all strings.Builder
	for _, c := range calls[:parts] {
		all.WriteString(c.user())
	}
	for _, m := range msgs {
		if !strings.Contains(all.String(), m.Content[:40]) {
			t.Errorf("message %s missing from the parts", m.ID)
		}
	}
}

func TestLLMStagedHugeMessage(t *testing.T) {
	f := newFakeLLM(t, func(n int, r chatRequest) (int, string) { return 200, fmt.Sprintf("summary %d", n) })
	huge := msg(0, memory.RoleTool, strings.Repeat("0123456789abcdef", 4000)) // one 64 KB line, no spaces
	s := llmSummarize(t, newLLM(t, f, LLMConfig{MaxInputTokens: 4000}, nil), []*memory.Message{huge}, 100)
	if s.Method != memory.SummaryLLM || len(f.calls()) < 3 {
		t.Fatalf("got %+v after %d calls", s, len(f.calls()))
	}
}

func TestLLMRetriesThenSucceeds(t *testing.T) {
	f := newFakeLLM(t, func(n int, _ chatRequest) (int, string) {
		if n == 1 {
			return 500, "overloaded"
		}
		return 200, goodAnswer
	})
	s := llmSummarize(t, newLLM(t, f, LLMConfig{}, nil), conversation(), 200)
	if s.Method != memory.SummaryLLM || len(f.calls()) != 2 {
		t.Fatalf("got %+v after %d calls", s, len(f.calls()))
	}
}

func TestLLMFallsBackToExtractive(t *testing.T) {
	f := newFakeLLM(t, func(int, chatRequest) (int, string) { return 503, "down for maintenance" })
	ext := extractive(t, true)
	s := llmSummarize(t, newLLM(t, f, LLMConfig{MaxRetries: 2}, ext), conversation(), 200)
	want := summarizeText(t, ext, conversation(), 200, "fix the compaction test")
	if s.Method != memory.SummaryExtractive || s.Text != want.Text || len(f.calls()) != 3 {
		t.Fatalf("got %+v after %d calls", s, len(f.calls()))
	}
	if !strings.HasPrefix(s.Note, "llm summarizer failed: ") || !strings.Contains(s.Note, "503") ||
		!strings.Contains(s.Note, "down for maintenance") || !strings.HasSuffix(s.Note, "; used extractive") {
		t.Errorf("note %q", s.Note)
	}
}

func TestLLMDoesNotRetryBadRequest(t *testing.T) {
	f := newFakeLLM(t, func(int, chatRequest) (int, string) { return 401, "bad key" })
	s := llmSummarize(t, newLLM(t, f, LLMConfig{}, extractive(t, false)), conversation(), 200)
	if s.Method != memory.SummaryExtractive || len(f.calls()) != 1 {
		t.Fatalf("got %+v after %d calls", s, len(f.calls()))
	}
}

type brokenSummarizer struct{}

func (brokenSummarizer) Summarize(context.Context, memory.SummaryRequest) (memory.Summary, error) {
	return memory.Summary{}, errors.New("disk on fire")
}

func TestLLMAnnotation(t *testing.T) {
	f := newFakeLLM(t, func(int, chatRequest) (int, string) { return 500, "boom" })
	for _, fb := range []memory.Summarizer{nil, brokenSummarizer{}} {
		s := llmSummarize(t, newLLM(t, f, LLMConfig{MaxRetries: -1}, fb), conversation(), 200)
		if s.Method != memory.SummaryAnnotation || s.Text != "[10 messages, 2026-01-02 10:00 – 10:09 UTC, summary unavailable]" {
			t.Errorf("got %+v", s)
		}
		if !strings.Contains(s.Note, "llm summarizer failed") || !strings.Contains(s.Note, "boom") {
			t.Errorf("note %q", s.Note)
		}
		if fb != nil && !strings.Contains(s.Note, "disk on fire") {
			t.Errorf("note %q", s.Note)
		}
	}
	// A target too small for the annotation still holds.
	s := llmSummarize(t, newLLM(t, f, LLMConfig{MaxRetries: -1}, nil), conversation(), 5)
	if n := count(t, s.Text); n > 5 || s.Text == "" {
		t.Errorf("%d tokens %q", n, s.Text)
	}
}

func TestLLMTimeout(t *testing.T) {
	f := newFakeLLM(t, func(int, chatRequest) (int, string) { return 200, goodAnswer })
	// The fake answers only when the client gives up: without the timeout
	// the call would hang. The attempts are counted by the client: on a
	// busy machine a 20 ms attempt may end before the server sees it.
	f.delay = time.Hour
	s := llmSummarize(t, newLLM(t, f, LLMConfig{Timeout: 20 * time.Millisecond, MaxRetries: 1}, extractive(t, false)), conversation(), 200)
	if s.Method != memory.SummaryExtractive || !strings.Contains(s.Note, "(2 attempts)") || !strings.Contains(s.Note, "Timeout") {
		t.Errorf("got %+v after %d calls", s, len(f.calls()))
	}
}

func TestLLMTrimsLongAnswer(t *testing.T) {
	var long strings.Builder
	for i := range 300 {
		fmt.Fprintf(&long, "user: fact number %d about memory/file_%d.go. It matters.\n", i, i)
	}
	f := newFakeLLM(t, func(int, chatRequest) (int, string) { return 200, long.String() })
	s := llmSummarize(t, newLLM(t, f, LLMConfig{}, nil), conversation(), 60)
	if n := count(t, s.Text); n > 60 || n < 40 || s.Method != memory.SummaryLLM {
		t.Fatalf("%d tokens: %+v", n, s)
	}
	if !strings.HasPrefix(long.String(), s.Text+"\n") {
		t.Errorf("not cut at a line: %q", s.Text[len(s.Text)-40:])
	}
}

func TestLLMCancelled(t *testing.T) {
	f := newFakeLLM(t, func(int, chatRequest) (int, string) { return 500, "boom" })
	l := newLLM(t, f, LLMConfig{Backoff: time.Hour}, extractive(t, false))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := l.Summarize(ctx, memory.SummaryRequest{Messages: conversation(), TargetTokens: 100, Encoding: enc})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("err %v after %v", err, time.Since(start))
	}
}

func TestNewLLMValidates(t *testing.T) {
	for _, cfg := range []LLMConfig{{}, {Model: "m", MaxInputTokens: 100}, {Model: "m", Temperature: 3}} {
		if _, err := NewLLM(cfg, testTokenizer(t), nil); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	if _, err := NewLLM(LLMConfig{Model: "m"}, nil, nil); err == nil {
		t.Error("nil tokenizer accepted")
	}
}

func TestCleanAnswer(t *testing.T) {
	for in, want := range map[string]string{
		"<think>\nhmm, let me see\n</think>\n\nuser: X": "user: X",
		"Here's a compact summary:\nuser: X\n":          "user: X",
		"Sure! Here is the summary:\n\nuser: X":         "user: X",
		"user: X\nassistant: Y":                         "user: X\nassistant: Y",
	} {
		if got := cleanAnswer(in); got != want {
			t.Errorf("cleanAnswer(%q) = %q", in, got)
		}
	}
}
