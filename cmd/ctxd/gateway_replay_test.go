package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/benchsample"
	"github.com/ctxd/ctxd/internal/fakemodel"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/tokenizer"
	openai "github.com/sashabaranov/go-openai"
)

// TestGatewayReplayAgentRuns replays recorded coding-agent runs through the
// gateway as the agent would send them (its whole history on every call)
// to an upstream that answers with the recorded step and checks every
// request it gets: within the model's window less the answer, and a valid
// tool sequence. CTXD_AGENT_RUNS names the runs (make eval-agent's
// AGENT_RUNS); without it, the synthetic runs of internal/benchsample.
// CTXD_GATEWAY_REPLAY_RUNS sets how many runs (default 2).
func TestGatewayReplayAgentRuns(t *testing.T) {
	t.Parallel()
	path := os.Getenv("CTXD_AGENT_RUNS")
	if path == "" {
		o := benchsample.Defaults
		o.Out = t.TempDir()
		if err := benchsample.Write(o); err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(o.Out, benchsample.AgentRunsFile)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("CTXD_AGENT_RUNS: %v", err)
	}
	defer f.Close()
	runs := 2
	if n, err := strconv.Atoi(os.Getenv("CTXD_GATEWAY_REPLAY_RUNS")); err == nil {
		runs = n
	}
	const window, answer = 16000, 4000
	var next openai.ChatCompletionMessage
	var ctxdTime []time.Duration
	var upstreamTime time.Duration
	tok := tokenizer.New()
	var faults []string // what the upstream should never have been sent
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		start := time.Now()
		defer func() { upstreamTime += time.Since(start) }()
		raw, _ := json.Marshal(body["messages"])
		var msgs []openai.ChatCompletionMessage
		if err := json.Unmarshal(raw, &msgs); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if err := toolSequence(msgs); err != "" {
			faults = append(faults, err)
			http.Error(w, `{"error":{"message":"invalid tool sequence: `+err+`"}}`, 400)
			return
		}
		n := 0
		for _, m := range msgs {
			c, _ := tok.Count("o200k_base", m.Content)
			n += c
			for _, tc := range m.ToolCalls {
				c, _ := tok.Count("o200k_base", tc.Function.Name+tc.Function.Arguments)
				n += c
			}
		}
		if n > window-answer {
			faults = append(faults, strconv.Itoa(n)+" tokens sent")
			http.Error(w, `{"error":{"message":"over the window: `+strconv.Itoa(n)+` tokens","code":"context_length_exceeded_test"}}`, 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "model": "gpt-4o",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": next}}})
	})
	ts := startServer(t, t.TempDir(), func(c *Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for run := 0; run < runs && sc.Scan(); run++ {
		var rec struct {
			ID       string                         `json:"id"`
			Messages []openai.ChatCompletionMessage `json:"messages"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		client, _ := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-upstream", http.Header{"X-Ctxd-Session": {"replay-" + strconv.Itoa(run)},
			"X-Ctxd-Context-Window": {strconv.Itoa(window)}})
		for i := 1; i < len(rec.Messages); i++ {
			if rec.Messages[i].Role != "assistant" {
				continue
			}
			next = rec.Messages[i]
			before := upstreamTime
			start := time.Now()
			_, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "gpt-4o",
				Messages: rec.Messages[:i], MaxCompletionTokens: answer})
			if err != nil {
				t.Fatalf("%s step %d: %v", rec.ID, i, err)
			}
			ctxdTime = append(ctxdTime, time.Since(start)-(upstreamTime-before))
		}
		// Each message stored once: none seen as a diverging history.
		last := 0
		for i, m := range rec.Messages {
			if m.Role == "assistant" {
				last = i
			}
		}
		stored := 0
		for _, m := range allMessages(ts, "replay-"+strconv.Itoa(run)) {
			if m.Kind != memory.KindSummary {
				stored++
			}
		}
		if stored != last+1 {
			t.Errorf("%s: %d messages stored, want %d", rec.ID, stored, last+1)
		}
	}
	if len(ctxdTime) == 0 {
		t.Fatal("no step replayed")
	}
	if len(faults) > 0 {
		t.Errorf("%d upstream requests over the window or with an invalid tool sequence: %q", len(faults), faults)
	}
	slices.Sort(ctxdTime)
	t.Logf("%d calls; ctxd time per call (excluding the upstream) p50 %v p99 %v", len(ctxdTime),
		ctxdTime[len(ctxdTime)/2], ctxdTime[len(ctxdTime)*99/100])
}

// toolSequence says what is wrong with msgs as an OpenAI tool sequence:
// each tool result answers a call of the assistant message before its run
// of results, and each call is answered before the next non-tool message.
func toolSequence(msgs []openai.ChatCompletionMessage) string {
	open := map[string]bool{}
	for i, m := range msgs {
		if m.Role != "tool" {
			for id := range open {
				return "call " + id + " unanswered before message " + strconv.Itoa(i)
			}
		}
		switch {
		case m.Role == "assistant":
			for _, tc := range m.ToolCalls {
				open[tc.ID] = true
			}
		case m.Role == "tool":
			if !open[m.ToolCallID] {
				return "result " + m.ToolCallID + " at " + strconv.Itoa(i) + " answers no open call"
			}
			delete(open, m.ToolCallID)
		}
	}
	return ""
}
