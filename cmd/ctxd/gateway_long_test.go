package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/fakemodel"
)

// TestGatewayLongSession plays a 1,000-step tool loop through the gateway
// (Chat Completions, the whole history resent on every call, as an agent
// does) against the fake model, and logs the gateway's own time per call
// (the round trip less the model's) in the first and last quarter: it
// must stay flat as the session grows. It takes minutes and its times are
// the machine's: `make test-long-session` runs it (CTXD_LONG_SESSION=1,
// CTXD_LONG_STEPS to change the length); `make test` skips it.
func TestGatewayLongSession(t *testing.T) {
	if os.Getenv("CTXD_LONG_SESSION") != "1" {
		t.Skip("a 1,000-step session takes minutes: run with CTXD_LONG_SESSION=1 (make test-long-session)")
	}
	steps := 1000
	if n, err := strconv.Atoi(os.Getenv("CTXD_LONG_STEPS")); err == nil && n > 0 {
		steps = n
	}
	const window = 16000
	task, err := fakemodel.NewTask(t.TempDir(), steps)
	if err != nil {
		t.Fatal(err)
	}
	model := fakemodel.New(fakemodel.Config{Window: window, Task: task, Instruction: agentPrompt})
	var modelTime atomic.Int64 // nanoseconds spent in the model, summed
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		model.ServeHTTP(w, r)
		modelTime.Add(int64(time.Since(start)))
	}))
	t.Cleanup(up.Close)
	ts := startServer(t, t.TempDir(), func(c *Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash", "description": "Run a command",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []string{"command"}}}}}
	// The client keeps its history encoded and adds each new message's
	// encoding, as an agent in its own process would: re-encoding the
	// whole history in this process on every call (8.7 MB at the end)
	// took a sixth of the CPU in the last quarter, and its garbage was
	// collected while the gateway's calls were timed.
	var history bytes.Buffer
	add := func(m any) {
		b, _ := json.Marshal(m)
		if history.Len() > 0 {
			history.WriteByte(',')
		}
		history.Write(b)
	}
	add(map[string]any{"role": "system", "content": "You are a coding agent."})
	add(map[string]any{"role": "user", "content": agentPrompt})
	toolsJSON, _ := json.Marshal(tools)
	var body bytes.Buffer
	var gateway []time.Duration // the gateway's own time, per call
	bodyBytes := 0
	// CTXD_LONG_PROFILE=prefix writes the process's CPU profile of the
	// first and of the last quarter of the steps (prefix-first.prof,
	// prefix-last.prof): what grows between them is what to look at.
	profile := os.Getenv("CTXD_LONG_PROFILE")
	quarter := func(name string) func() {
		if profile == "" {
			return func() {}
		}
		f, err := os.Create(profile + "-" + name + ".prof")
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		return sync.OnceFunc(func() { pprof.StopCPUProfile(); f.Close() })
	}
	stopProfile := quarter("first")
	// A step the model asks again (its window showed an older result
	// last) costs a call: a tenth more calls are allowed, and counted.
	for call := 1; call <= steps+1+steps/10; call++ {
		switch call {
		case steps/4 + 1:
			stopProfile()
		case steps - steps/4 + 1:
			stopProfile = quarter("last")
		}
		body.Reset()
		body.WriteString(`{"max_tokens":2000,"messages":[`)
		body.Write(history.Bytes())
		body.WriteString(`],"model":"fake-model","tools":`)
		body.Write(toolsJSON)
		body.WriteString(`}`)
		bodyBytes = body.Len()
		// the server reads the whole body before it answers: the buffer
		// is free again once the answer is read
		req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", bytes.NewReader(body.Bytes()))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Ctxd-Context-Window", strconv.Itoa(window))
		inModel := modelTime.Load()
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Choices []struct {
				Message map[string]any `json:"message"`
			} `json:"choices"`
		}
		err = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		gateway = append(gateway, time.Since(start)-time.Duration(modelTime.Load()-inModel))
		if res.StatusCode != 200 || err != nil || len(out.Choices) == 0 {
			t.Fatalf("call %d: %d %v", call, res.StatusCode, err)
		}
		msg := out.Choices[0].Message
		add(msg)
		calls, _ := msg["tool_calls"].([]any)
		if len(calls) == 0 {
			break
		}
		id := calls[0].(map[string]any)["id"].(string)
		k := stepOfCall(t, id)
		// a short output: the history's size, not its text, is what grows
		add(map[string]any{"role": "tool", "tool_call_id": id,
			"content": fmt.Sprintf("%s\nstep %d: %s", task.Marker(k), k, strings.Repeat("ok ", 40))})
	}
	stopProfile()
	s := model.Stats()
	comp := 0
	for _, raw := range ts.mustDo(200, "GET", "/v1/sessions", nil)["sessions"].([]any) {
		c, _ := raw.(map[string]any)["compactions"].(float64)
		comp += int(c)
	}
	q := len(gateway) / 4
	first, last := median(gateway[:q]), median(gateway[len(gateway)-q:])
	t.Logf("%d steps: calls %d (flush turns %d, steps asked again %d), windows over the limit %d, compactions %d, without the instruction %d, last body %d KB; "+
		"gateway time per call: first quarter median %v, last quarter median %v: %.2fx",
		steps, s.Calls, s.FlushTurns, s.MainCalls-steps-1, s.OverWindow, comp, s.WithoutInstruction, bodyBytes>>10, first, last, float64(last)/float64(first))
	for _, v := range s.Violations {
		t.Errorf("provider rule broken: %s", v)
	}
	if !s.Completed {
		t.Errorf("the task did not complete: step %d of %d", s.Steps, steps)
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
