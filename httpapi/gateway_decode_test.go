package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// The one pass reads a model call as the decoders did (each member and
// message as sent), and leaves every body it cannot take whole to them, so
// a refusal says what it said before.
func TestSplitModelCall(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
		` { "messages" : [ {"role":"user", "content":[{"type":"text","text":"a\u00e9"}]} , {"role":"assistant","content":null} ] , "x" : {"y":[1, 2]} } `,
		`{"messages":[],"stream":true}`,
		`{"messages":"not a list","model":"m"}`,
		`{"model":"m"}`,
	} {
		raw, elems, ok := splitModelCall([]byte(body), "messages", nil)
		if !ok {
			t.Errorf("%s: not taken", body)
			continue
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &want); err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if !bytes.Equal(raw[k], v) {
				t.Errorf("%s: member %s is %s, want %s", body, k, raw[k], v)
			}
		}
		var wantElems []json.RawMessage
		if json.Unmarshal(want["messages"], &wantElems) != nil {
			wantElems = nil
		}
		if len(elems) != len(wantElems) || (elems == nil) != (wantElems == nil) {
			t.Errorf("%s: %d messages, want %d", body, len(elems), len(wantElems))
			continue
		}
		for i := range elems {
			if !bytes.Equal(elems[i], wantElems[i]) {
				t.Errorf("%s: message %d is %s, want %s", body, i, elems[i], wantElems[i])
			}
		}
	}
	for _, body := range []string{
		`{"messages":[{"role":"user","role":"system","content":"x"}]}`,
		`{"model":"a","model":"b","messages":[]}`,
		`{"messages":[{"role":"user","content":"\ud800"}]}`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
		`{"messages":[]} {}`,
		`{"messages":[]`,
		`[{"role":"user"}]`,
		`null`,
	} {
		if _, _, ok := splitModelCall([]byte(body), "messages", nil); ok {
			t.Errorf("%s: taken, want it left to the decoders", body)
		}
	}
}

// What the cache answers is the caller's to change: storing a message sets
// its fields, which must not reach the next call's copy.
func TestDecodedCacheCopies(t *testing.T) {
	var c decodedCache
	raw := []byte(`{"role":"assistant","tool_calls":[{"id":"c1"}]}`)
	c.put(raw, []*memory.Message{{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c1"}}, Metadata: map[string]any{"k": true}}}, true)
	d, ok := c.get(bytes.Clone(raw))
	if !ok || !d.thinking || len(d.msgs) != 1 {
		t.Fatalf("got %+v, %v", d, ok)
	}
	d.msgs[0].ID, d.msgs[0].ToolCalls[0].ID, d.msgs[0].Metadata["k"] = "m1", "changed", false
	again, _ := c.get(raw)
	if m := again.msgs[0]; m.ID != "" || m.ToolCalls[0].ID != "c1" || m.Metadata["k"] != true {
		t.Errorf("the cache's copy changed: %+v", m)
	}
	if _, ok := c.get([]byte(`{"role":"assistant","tool_calls":[{"id":"c2"}]}`)); ok {
		t.Error("another message's bytes answered")
	}
}

// A call whose history repeats a recent call's, byte for byte, is read
// from where the repeat ends, and reads as the whole body would: the
// members after the history, the new messages, and every refusal.
func TestSplitModelCallRepeatedHistory(t *testing.T) {
	msg := func(i int) string {
		return fmt.Sprintf(`{"role":"tool","tool_call_id":"c%d","content":"output %d"}`, i, i)
	}
	history := func(n int, edit int) string {
		parts := []string{`{"role":"system","content":"You are a coding agent."}`, `{"role":"user","content":"fix it"}`}
		for i := range n {
			m := msg(i)
			if i == edit {
				m = strings.Replace(m, "output", "trimmed", 1)
			}
			parts = append(parts, m)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	var lists listCache
	var last *seenList // the last call recorded
	for _, c := range []struct {
		body   string
		resume bool // read from where the last call's history stopped repeating
		k      int  // the elements that repeat it
	}{
		{`{"model":"m","messages":` + history(10, -1) + `,"max_tokens":5}`, false, 0},
		{`{"model":"m","messages":` + history(12, -1) + `,"max_tokens":5,"tools":[{"x":1}]}`, true, 12},
		{`{"model":"m","messages":` + history(12, 4) + `,"max_tokens":5}`, true, 6}, // an edited message
		{`{"model":"m","messages":` + history(13, -1) + `}`, true, 6},
		{`{"model":"m","messages":` + history(13, -1) + ` , "":1}`, false, 0},                        // a "" member after
		{`{"model":"m","messages":` + history(13, -1) + `,"model":"n"}`, false, 0},                   // a duplicate
		{`{"model":"m","messages":` + strings.TrimSuffix(history(13, -1), "]") + `,]}`, false, 0},    // a trailing comma
		{`{"model":"m","messages":` + strings.TrimSuffix(history(14, -1), "]") + "\xff]}", false, 0}, // bad text after
		{`{"model":"m","messages":` + history(14, -1) + `} {}`, false, 0},
		{`{"model":"m","messages":` + history(15, -1) + `}`, true, 15},
	} {
		raw, elems, rep, ok := splitRepeat([]byte(c.body), "messages", &lists)
		wantRaw, wantElems, wantOK := splitModelCall([]byte(c.body), "messages", nil)
		same := func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }
		if ok != wantOK || !maps.EqualFunc(raw, wantRaw, same) || !slices.EqualFunc(elems, wantElems, same) {
			t.Errorf("%.60s...: read as %v %d members %d messages, want %v %d %d", c.body, ok, len(raw), len(elems), wantOK, len(wantRaw), len(wantElems))
		}
		if n := lists.resumed.Swap(0); (n == 1) != c.resume {
			t.Errorf("%.60s...: resumed %d times, want %v", c.body, n, c.resume)
		}
		// what the gateway is told repeats the last recorded call
		if c.resume && (rep.seen != last || rep.k != c.k) || !c.resume && rep.seen != nil {
			t.Errorf("%.60s...: repeats %d elements of call %p, want %d of %p", c.body, rep.k, rep.seen, c.k, last)
		}
		if rep.self != nil {
			last = rep.self
		}
	}
}

// A call whose history repeats the conversation's last call takes the
// repeated messages as that call decoded them: only the new ones are
// looked up or decoded, in both wire formats, and the upstream is sent
// what a server that decodes every message sends.
func TestGatewayRepeatDecodedOnce(t *testing.T) {
	var sent []string // the upstream's requests, in order
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sent = append(sent, string(b))
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/messages") {
			_, _ = w.Write([]byte(`{"type":"message","role":"assistant","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":100}}`))
			return
		}
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"done"}}],"usage":{"prompt_tokens":100}}`))
	}))
	t.Cleanup(up.Close)
	testServer(t)
	opts := Options{Logger: shared.srv.opts.Logger, Gateway: GatewayOptions{OpenAI: Upstream{URL: up.URL}, Anthropic: Upstream{URL: up.URL}}}
	// the messages each call looks up: the first call all of them, each
	// next one those after the last call's history (a list of one, under
	// the two its record is found by, is not recorded)
	for _, format := range []struct {
		path, system, turn string
		lookups            []int64
	}{
		{"/v1/chat/completions", `{"role":"system","content":"You are a coding agent."},`, `{"role":"%s","content":"turn %d"}`, []int64{2, 2, 2, 2}},
		{"/v1/messages", "", `{"role":"%s","content":[{"type":"text","text":"turn %d"}]}`, []int64{1, 3, 2, 2}},
	} {
		t.Run(format.path, func(t *testing.T) {
			play := func(s *Server, session string, fresh bool) (lookups []int64) {
				var msgs []string
				for call := range 4 {
					for len(msgs) < 2*call+1 {
						msgs = append(msgs, fmt.Sprintf(format.turn, []string{"user", "assistant"}[len(msgs)%2], len(msgs)))
					}
					body := `{"model":"m","max_tokens":500,"messages":[` + format.system + strings.Join(msgs, ",") + `]}`
					if fresh {
						s = New(shared.svc, opts) // no recent call to take messages from
					}
					before := s.decodedOpenAI.lookups.Load() + s.decodedAnthropic.lookups.Load()
					req := httptest.NewRequest("POST", format.path, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(SessionHeader, session)
					req.Header.Set("X-Ctxd-Context-Window", "16000")
					rec := httptest.NewRecorder()
					s.Handler().ServeHTTP(rec, req)
					if rec.Code != 200 {
						t.Fatalf("call %d: %d %s", call+1, rec.Code, rec.Body)
					}
					lookups = append(lookups, s.decodedOpenAI.lookups.Load()+s.decodedAnthropic.lookups.Load()-before)
				}
				return lookups
			}
			name := "repeat-decoded" + strings.ReplaceAll(format.path, "/", "-")
			sent = nil
			lookups := play(New(shared.svc, opts), name, false)
			withRepeat := sent
			sent = nil
			play(nil, name+"-fresh", true)
			if !slices.Equal(lookups, format.lookups) {
				t.Errorf("messages looked up per call: %v, want %v", lookups, format.lookups)
			}
			for i := range withRepeat {
				if got, want := strings.ReplaceAll(withRepeat[i], name, "S"), strings.ReplaceAll(sent[i], name+"-fresh", "S"); got != want {
					t.Errorf("call %d sent upstream\n%s\nwhere a server decoding every message sent\n%s", i+1, got, want)
				}
			}
		})
	}
}
