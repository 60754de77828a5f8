package httpapi

import (
	"bytes"
	"encoding/json"
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
		raw, elems, ok := splitModelCall([]byte(body), "messages")
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
		if _, _, ok := splitModelCall([]byte(body), "messages"); ok {
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
