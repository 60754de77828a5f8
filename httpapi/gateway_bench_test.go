package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkGatewayHistory measures one gateway call (Chat Completions,
// the whole history resent, as an agent sends it) against a session that
// holds that history, with 100 and 1,000 resent messages: what an agent's
// call costs as its history grows. The upstream answers at once; each call
// stores its answer, which the next call, resending the same history,
// supersedes. A flat gateway costs about the same at both sizes.
func BenchmarkGatewayHistory(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"done"}}],"usage":{"prompt_tokens":100}}`))
	}))
	b.Cleanup(up.Close)
	testServer(b)
	s := New(shared.svc, Options{Logger: shared.srv.opts.Logger, Gateway: GatewayOptions{OpenAI: Upstream{URL: up.URL}}})
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			msgs := []any{map[string]any{"role": "system", "content": "You are a coding agent."},
				map[string]any{"role": "user", "content": "fix the failing test in the parser package"}}
			for i := 0; len(msgs) < n-1; i++ {
				id := fmt.Sprintf("call_%d", i)
				msgs = append(msgs,
					map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
						"function": map[string]any{"name": "bash", "arguments": fmt.Sprintf(`{"command":"grep -n parse%d *.go"}`, i)}}}},
					map[string]any{"role": "tool", "tool_call_id": id, "content": fmt.Sprintf("step %d: %s", i, strings.Repeat("ok ", 40))})
			}
			msgs = append(msgs[:n-1], map[string]any{"role": "user", "content": "and now?"})
			body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "max_tokens": 1000})
			call := func() {
				req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(SessionHeader, fmt.Sprintf("bench-history-%d", n))
				req.Header.Set("X-Ctxd-Context-Window", "16000")
				rec := httptest.NewRecorder()
				s.Handler().ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("%d: %.300s", rec.Code, rec.Body.Bytes())
				}
			}
			call() // the session holds the history from here on
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				call()
			}
		})
	}
}

// BenchmarkSplitModelCall measures the one pass over a model call's body
// (an 8 MB history of 2,000 messages): reading from a bytes.Buffer, which
// jsontext parses in place, it ran at 330-470 MB/s; from a bytes.Reader,
// copied into the decoder's growing buffer, 183 MB/s. "repeated" is the
// next call of the same conversation, whose history repeats the last
// call's and adds a message: only the new message is read.
func BenchmarkSplitModelCall(b *testing.B) {
	var msgs []any
	for i := range 2000 {
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": fmt.Sprint(i), "content": strings.Repeat("word ", 800)})
	}
	last, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs[:len(msgs)-1]})
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	for _, repeated := range []bool{false, true} {
		b.Run(map[bool]string{false: "whole", true: "repeated"}[repeated], func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				var lists *listCache
				if repeated {
					lists = &listCache{}
					b.StopTimer()
					splitModelCall(last, "messages", lists)
					b.StartTimer()
				}
				if _, _, ok := splitModelCall(body, "messages", lists); !ok {
					b.Fatal("not taken")
				}
			}
		})
	}
}
