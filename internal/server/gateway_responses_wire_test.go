package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/internal/fakemodel"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/tokenizer"
)

// responsesUpstream is a fake OpenAI Responses API that validates what it
// is sent the way the real one does: every function call has its output
// and every output its call, a reasoning item is followed by the item it
// reasoned for, and the input plus max_output_tokens fit the window (in
// o200k_base, OpenAI's count). It answers a tool call (with a reasoning
// item) until the client has run steps of them, then a message.
type responsesUpstream struct {
	*fakemodel.Recorder
	mu        sync.Mutex
	window    int
	steps     int
	n, step   int               // requests answered, tool calls asked for
	reasoning map[string]string // reasoning item id -> the item as the fake sent it
}

func newResponsesUpstream(t *testing.T, window, steps int) *responsesUpstream {
	tok := tokenizer.New()
	u := &responsesUpstream{window: window, steps: steps, reasoning: map[string]string{}}
	u.Recorder = fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		u.mu.Lock()
		defer u.mu.Unlock()
		var req struct {
			Input           []json.RawMessage `json:"input"`
			Instructions    string            `json:"instructions"`
			MaxOutputTokens int               `json:"max_output_tokens"`
			Stream          bool              `json:"stream"`
			Previous        *string           `json:"previous_response_id"`
		}
		reqs := u.Requests()
		raw := reqs[len(reqs)-1].Raw
		if err := json.Unmarshal(raw, &req); err != nil {
			openaiError(w, 400, "invalid_request_error", err.Error())
			return
		}
		if r.URL.Path != "/v1/responses" {
			openaiError(w, 404, "not_found", "no route "+r.URL.Path)
			return
		}
		if req.Previous != nil {
			openaiError(w, 400, "previous_response_not_found", "the fake keeps no responses")
			return
		}
		tokens, _ := tok.Count("o200k_base", req.Instructions)
		calls, outputs := map[string]bool{}, map[string]bool{}
		last, flush := "", false
		for i, raw := range req.Input {
			var it struct {
				Type, Role, CallID, ID, Arguments string
				Content, Output                   json.RawMessage
			}
			json.Unmarshal(raw, &it)
			if it.CallID == "" {
				var alt struct {
					CallID string `json:"call_id"`
				}
				json.Unmarshal(raw, &alt)
				it.CallID = alt.CallID
			}
			n, _ := tok.Count("o200k_base", string(it.Content)+it.Arguments+string(it.Output))
			tokens += n
			switch it.Type {
			case "reasoning":
				if want := u.reasoning[it.ID]; want != string(raw) {
					openaiError(w, 400, "invalid_request_error", fmt.Sprintf("input[%d]: reasoning item %s is not as it was sent: %s", i, it.ID, raw))
					return
				}
				var next struct{ Type, Role string }
				if i+1 < len(req.Input) {
					json.Unmarshal(req.Input[i+1], &next)
				}
				if next.Type != "function_call" && next.Role != "assistant" {
					openaiError(w, 400, "invalid_request_error", fmt.Sprintf("Item '%s' of type 'reasoning' was provided without its required following item.", it.ID))
					return
				}
			case "function_call":
				calls[it.CallID] = true
			case "function_call_output":
				if !calls[it.CallID] {
					openaiError(w, 400, "invalid_request_error", "No tool call found for function call output with call_id "+it.CallID+".")
					return
				}
				outputs[it.CallID] = true
			}
			last = it.Type + ":" + it.CallID
			flush = (it.Type == "message" || it.Type == "") && strings.Contains(string(it.Content), "[ctxd] This conversation is about to be compacted")
		}
		for id := range calls {
			if !outputs[id] {
				openaiError(w, 400, "invalid_request_error", "No tool output found for function call "+id+".")
				return
			}
		}
		if tokens+req.MaxOutputTokens > u.window {
			openaiError(w, 400, "context_length_exceeded", fmt.Sprintf("Your input exceeds the context window of this model (%d + %d > %d).", tokens, req.MaxOutputTokens, u.window))
			return
		}
		u.n++
		id := "resp_" + strconv.Itoa(u.n)
		var output []json.RawMessage
		if strings.HasPrefix(last, "function_call_output:call_") && last == "function_call_output:call_"+strconv.Itoa(u.steps) {
			output = append(output, json.RawMessage(`{"type":"message","id":"msg_`+strconv.Itoa(u.n)+`","status":"completed","role":"assistant","content":[{"type":"output_text","text":"done after `+strconv.Itoa(u.steps)+` steps","annotations":[]}]}`))
		} else if flush {
			output = append(output, json.RawMessage(`{"type":"function_call","id":"fc_note","status":"completed","call_id":"call_note","name":"save_memory","arguments":"{\"note\":\"the task: find the failing part\"}"}`))
		} else {
			u.step++
			step := u.step
			// keys sorted, as the test's client writes them back
			rs := fmt.Sprintf(`{"encrypted_content":"gAAAA%dopaque==","id":"rs_%d","summary":[],"type":"reasoning"}`, u.n, u.n)
			u.reasoning[fmt.Sprintf("rs_%d", u.n)] = rs
			output = append(output, json.RawMessage(rs), json.RawMessage(fmt.Sprintf(
				`{"type":"function_call","id":"fc_%d","status":"completed","call_id":"call_%d","name":"shell","arguments":"{\"cmd\":\"cat part%d.log\"}"}`, u.n, step, step)))
		}
		resp := map[string]any{"id": id, "object": "response", "status": "completed", "model": "gpt-5", "output": output,
			"usage": map[string]any{"input_tokens": tokens, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens": 5, "total_tokens": tokens + 5}}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(resp)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(v map[string]any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
			w.(http.Flusher).Flush()
		}
		event(map[string]any{"type": "response.created", "sequence_number": 0, "response": map[string]any{"id": id, "object": "response", "status": "in_progress", "output": []any{}}})
		for i, it := range output {
			event(map[string]any{"type": "response.output_item.added", "output_index": i, "item": it})
			event(map[string]any{"type": "response.output_item.done", "output_index": i, "item": it})
		}
		event(map[string]any{"type": "response.completed", "response": resp})
	})
	return u
}

func openaiError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": code}})
}

// sseOutput reads a Responses stream's completed response.
func sseOutput(t *testing.T, body []byte) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev map[string]any
			json.Unmarshal([]byte(data), &ev)
			if ev["type"] == "response.completed" {
				return ev["response"].(map[string]any)
			}
		}
	}
	t.Fatalf("no response.completed in the stream: %s", body)
	return nil
}

// TestGatewayResponsesToolLoop runs a Codex-like loop through POST
// /v1/responses (streamed, with reasoning items passed back and tool
// outputs of ~900 tokens) in a window of 6,000 tokens: the upstream's
// validation passes on every call, reasoning items reach it as it sent
// them, the session stores each item once, and it compacts.
func TestGatewayResponsesToolLoop(t *testing.T) {
	t.Parallel()
	const window, steps = 6000, 16
	up := newResponsesUpstream(t, window, steps)
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	h := http.Header{"Authorization": {"Bearer sk-up"}, "X-Ctxd-Context-Window": {strconv.Itoa(window)}}
	input := []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Find the failing part."}}}}
	session, compacted := "", false
	for call := 1; ; call++ {
		status, hdr, body := fakemodel.Post(t, ts.URL+"/v1/responses", h, map[string]any{"model": "gpt-5", "instructions": "You are a coding agent.",
			"input": input, "tools": []any{map[string]any{"type": "function", "name": "shell", "parameters": map[string]any{"type": "object"}}},
			"stream": call%2 == 0, "store": false, "max_output_tokens": 1000, "include": []string{"reasoning.encrypted_content"},
			"prompt_cache_key": "codex-conv-1"})
		if status != 200 {
			t.Fatalf("call %d: %d %s", call, status, body)
		}
		if session == "" {
			session = hdr.Get("X-Ctxd-Session")
		} else if got := hdr.Get("X-Ctxd-Session"); got != session {
			t.Fatalf("call %d: session %q, the first call's %q", call, got, session)
		}
		compacted = compacted || hdr.Get("X-Ctxd-Compacted") == "true"
		var resp map[string]any
		if call%2 == 0 {
			resp = sseOutput(t, body)
		} else if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatal(err)
		}
		output := resp["output"].([]any)
		if call > steps+1 {
			t.Fatalf("call %d: still no answer; output %v", call, output)
		}
		input = append(input, output...)
		last := output[len(output)-1].(map[string]any)
		if last["type"] == "message" {
			if call != steps+1 {
				t.Fatalf("answered after %d calls, want %d", call, steps+1)
			}
			break
		}
		lines := make([]string, 60)
		for i := range lines {
			lines[i] = fmt.Sprintf("part %s line %d: checksum %d status ok", last["call_id"], i, i*7919%1000)
		}
		input = append(input, map[string]any{"type": "function_call_output", "call_id": last["call_id"], "output": strings.Join(lines, "\n")})
	}
	// Flush turns are spaced: at most one in 20 calls (< 5 per 100).
	if extra := up.Count() - (steps + 1); extra > 1 {
		t.Fatalf("%d model calls for %d client calls: %d flush turns, want at most 1", up.Count(), steps+1, extra)
	}
	if session != "codex-conv-1" {
		t.Fatalf("session %q, want the prompt_cache_key's", session)
	}
	// Each item stored once: a superseded copy would be counted too.
	originals := 0
	for _, m := range ts.allMessages(session) {
		if m.Kind != "summary" && !strings.HasPrefix(m.Content, "Note saved before compaction") {
			originals++
		}
	}
	// instructions, the task, 16 calls and outputs, the answer
	if want := 2 + 2*steps + 1; originals != want {
		t.Fatalf("%d originals stored, want %d", originals, want)
	}
	st := ts.session(session)
	if st.Compactions < 1 || !compacted {
		t.Fatalf("compactions %v, X-Ctxd-Compacted seen %v: want the session compacted", st.Compactions, compacted)
	}
}

// TestGatewayResponsesPreviousResponseID: a client that keeps the
// conversation upstream (store, previous_response_id) sends only its new
// input; ctxd sends the upstream the whole window without the id, and
// answers an id it does not know as OpenAI does.
func TestGatewayResponsesPreviousResponseID(t *testing.T) {
	t.Parallel()
	up := newResponsesUpstream(t, 100_000, 1)
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	h := http.Header{"Authorization": {"Bearer sk-up"}}
	status, _, body := fakemodel.Post(t, ts.URL+"/v1/responses", h, map[string]any{"model": "gpt-5", "input": "Run the tests."})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var r1 map[string]any
	json.Unmarshal(body, &r1)
	call := r1["output"].([]any)[1].(map[string]any)
	status, hdr, body := fakemodel.Post(t, ts.URL+"/v1/responses", h, map[string]any{"model": "gpt-5", "previous_response_id": r1["id"],
		"input": []any{map[string]any{"type": "function_call_output", "call_id": call["call_id"], "output": "3 passed"}}})
	if status != 200 {
		t.Fatalf("continuation: %d %s", status, body)
	}
	sent := up.Last(t)
	if _, ok := sent.Body["previous_response_id"]; ok {
		t.Fatal("previous_response_id was sent upstream")
	}
	var types []string
	for _, it := range sent.Body["input"].([]any) {
		m := it.(map[string]any)
		types = append(types, fmt.Sprint(m["type"], "/", m["role"]))
	}
	if got, want := strings.Join(types, " "), "message/user function_call/<nil> function_call_output/<nil>"; got != want {
		t.Fatalf("upstream input %s, want %s", got, want)
	}
	msgs := ts.allMessages(hdr.Get("X-Ctxd-Session"))
	if len(msgs) != 4 || msgs[3].Content != "done after 1 steps" {
		t.Fatalf("stored %v", msgs)
	}
	// An id ctxd does not know: OpenAI's error shape and code.
	status, _, body = fakemodel.Post(t, ts.URL+"/v1/responses", h, map[string]any{"model": "gpt-5", "previous_response_id": "resp_unknown", "input": "hi"})
	var e struct {
		Error struct{ Message, Type, Code, Param string }
	}
	if json.Unmarshal(body, &e); status != 400 || e.Error.Code != "previous_response_not_found" || e.Error.Param != "previous_response_id" || e.Error.Type != "invalid_request_error" {
		t.Fatalf("unknown id: %d %s", status, body)
	}
	// compact: refused clearly, in OpenAI's shape
	status, _, body = fakemodel.Post(t, ts.URL+"/v1/responses/compact", h, map[string]any{"model": "gpt-5", "input": "hi"})
	if json.Unmarshal(body, &e); status != 400 || e.Error.Code != "unsupported_by_ctxd" || !strings.Contains(e.Error.Message, "ctxd compacts") {
		t.Fatalf("compact: %d %s", status, body)
	}
	// A bad body: OpenAI's shape too.
	status, _, body = fakemodel.Post(t, ts.URL+"/v1/responses", h, map[string]any{"model": "gpt-5"})
	if json.Unmarshal(body, &e); status != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "input") {
		t.Fatalf("no input: %d %s", status, body)
	}
}
