package summarize

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// fuzzMessages turns fuzzed text into a conversation: records split on
// \x1e, roles in turn; a record starting with "!" is an assistant's tool
// call whose arguments are the rest, and "@name:" names the speaker.
func fuzzMessages(conv string) []*memory.Message {
	roles := []memory.Role{memory.RoleUser, memory.RoleAssistant, memory.RoleTool, memory.RoleSystem}
	var out []*memory.Message
	for i, rec := range strings.Split(conv, "\x1e") {
		m := msg(i, roles[i%len(roles)], rec)
		if name, rest, ok := strings.Cut(rec, ":"); ok && strings.HasPrefix(name, "@") {
			m.Name, m.Content = name[1:], rest
		}
		if args, ok := strings.CutPrefix(rec, "!"); ok {
			m.Role, m.Content = memory.RoleAssistant, ""
			m.ToolCalls = []memory.ToolCall{{ID: fmt.Sprint("c", i), Type: "function", Function: memory.FunctionCall{Name: "run", Arguments: args}}}
		}
		if i%7 == 6 {
			m.Kind = memory.KindSummary
		}
		out = append(out, m)
	}
	return out
}

var convSeeds = []string{
	"", " ", "hello", "Hi, can you fix the login bug?\x1eSure. The bug is in auth/session.go line 42: the token expiry is compared in local time.\x1eok\x1e@alice:Deploy at 5pm on 2026-01-15, ticket PROJ-481.",
	"!{\"path\":\"/tmp\"}\x1ea.txt\nb.txt\nTraceback (most recent call last):\n  File \"x.py\", line 3\nValueError: bad",
	// One letter repeated is a single BPE piece, and tiktoken-go merges a
	// piece in superlinear time (20 KB: 0.6 s; 80 KB: 17 s): longer ones
	// exceed the fuzzer's 10 s per input.
	"<|endoftext|>\x1e\x00\x1e\xff\xfe\x1e😀👩‍👩‍👧‍👦\x1e\u202eevil", strings.Repeat("word ", 3000), strings.Repeat("a", 4000),
	strings.Repeat("line\n", 2000), strings.Repeat("```\ncode\n", 300), strings.Repeat("Dr. A. B. Smith went to St. Louis. ", 200),
	strings.Repeat("\x1e", 50), "!" + strings.Repeat("{\"k\":", 500),
}

// The extractive summary of any conversation fits its target exactly, or
// the request is refused as invalid (no text, or a target below 1).
func FuzzExtractive(f *testing.F) {
	for i, c := range convSeeds {
		f.Add(c, int16([]int{1, 5, 50, 500, 16, 3}[i%6]), "fix the login bug", i%2 == 0)
	}
	f.Add("hello", int16(0), "", false)
	f.Add("hello", int16(-5), "\x00", true)
	f.Fuzz(func(t *testing.T, conv string, target int16, prompt string, withEmbedder bool) {
		var e *Extractive
		if withEmbedder {
			e = NewExtractive(testTokenizer(t), testEmbedder(t))
		} else {
			e = NewExtractive(testTokenizer(t), nil)
		}
		req := memory.SummaryRequest{Messages: fuzzMessages(conv), TargetTokens: int(target), Encoding: enc, Prompt: prompt}
		s, err := e.Summarize(context.Background(), req)
		checkSummary(t, req, s, err)
	})
}

// checkSummary: a summary within the target, or an invalid request refused.
func checkSummary(t *testing.T, req memory.SummaryRequest, s memory.Summary, err error) {
	t.Helper()
	empty := countMessages(req.Messages) == 0
	if req.TargetTokens < 1 || empty {
		if memory.ErrorCode(err) != memory.EINVALID {
			t.Fatalf("target %d, %d messages with text: %v, want invalid_request", req.TargetTokens, countMessages(req.Messages), err)
		}
		return
	}
	if err != nil {
		t.Fatalf("target %d: %v", req.TargetTokens, err)
	}
	if n := count(t, s.Text); n > req.TargetTokens {
		t.Fatalf("%s summary of %d tokens over target %d: %q", s.Method, n, req.TargetTokens, s.Text)
	}
}

// A fake OpenAI server per fuzz process; it answers with fuzzAnswer.
var (
	fuzzLLMOnce   sync.Once
	fuzzLLMServer *httptest.Server
	fuzzAnswer    atomic.Pointer[fuzzReply]
)

type fuzzReply struct {
	status int
	text   string
}

func fakeOpenAI() *httptest.Server {
	fuzzLLMOnce.Do(func() {
		fuzzLLMServer = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reply := fuzzAnswer.Load()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(reply.status)
			if reply.status != http.StatusOK {
				fmt.Fprintf(w, `{"error":{"message":%q,"type":"server_error"}}`, reply.text)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion", "created": 1767348000, "model": "fuzz",
				"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": reply.text}, "finish_reason": "stop"}},
				"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
			})
		}))
	})
	return fuzzLLMServer
}

// Whatever the model answers (any text, or an error status), the LLM
// summarizer returns a summary within the target: the model's, trimmed, or
// its fallback's.
func FuzzLLM(f *testing.F) {
	for i, answer := range []string{"", " ", "user: fixed the login bug in auth/session.go.", strings.Repeat("long answer ", 2000),
		"<think>hmm</think>summary", "```\nsummary\n```", "\x00\xff", "😀", "Summary:\n- a\n- b", strings.Repeat("\n", 100)} {
		f.Add(answer, uint8(i), convSeeds[i%len(convSeeds)], int16([]int{50, 5, 500, 16}[i%4]))
	}
	f.Fuzz(func(t *testing.T, answer string, statusPick uint8, conv string, target int16) {
		status := http.StatusOK
		switch statusPick % 8 {
		case 5:
			status = http.StatusInternalServerError
		case 6:
			status = http.StatusBadRequest
		case 7:
			status = http.StatusTooManyRequests
		}
		fuzzAnswer.Store(&fuzzReply{status: status, text: answer})
		l, err := NewLLM(LLMConfig{BaseURL: fakeOpenAI().URL + "/v1", Model: "fuzz", MaxRetries: -1, Timeout: 10 * time.Second,
			MaxInputTokens: 512}, testTokenizer(t), NewExtractive(testTokenizer(t), nil))
		if err != nil {
			t.Fatal(err)
		}
		req := memory.SummaryRequest{Messages: fuzzMessages(conv), TargetTokens: int(target), Encoding: enc, Prompt: "the bug"}
		s, err := l.Summarize(context.Background(), req)
		checkSummary(t, req, s, err)
	})
}
