package servertest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/tokenizer"
)

// The checks of what a client reads of a session, shared by the wire tests
// (internal/server) and the process-level ones (cmd/ctxd, on a child
// process as well as in process): answers decoded into the api types.

// get decodes the answer to GET url into out, failing tb on any status but
// 200, and on a field the api types lack: a contract the test would not see.
func get(tb testing.TB, url string, header http.Header, out any) {
	tb.Helper()
	status, raw := Do(tb, "GET", url, header, nil)
	if status != http.StatusOK {
		tb.Fatalf("GET %s = %d: %s", url, status, raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		tb.Fatalf("GET %s: answer does not decode into %T: %v: %.300s", url, out, err, raw)
	}
}

// Message is GET /v1/messages/{id} of the server at base.
func Message(tb testing.TB, base string, header http.Header, id string) *api.Message {
	tb.Helper()
	var m api.Message
	get(tb, base+"/v1/messages/"+id, header, &m)
	return &m
}

// Messages is every message of session, in every state, oldest first, as
// the server at base (its URL) lists them to a client sending header.
func Messages(tb testing.TB, base string, header http.Header, session string) []api.Message {
	tb.Helper()
	var out []api.Message
	cursor := ""
	for {
		var page api.MessageList
		get(tb, base+"/v1/sessions/"+session+"/messages?state=all&limit=1000&cursor="+cursor, header, &page)
		out = append(out, page.Messages...)
		if cursor = page.NextCursor; cursor == "" {
			return out
		}
	}
}

// Status is GET /v1/sessions/{session} of the server at base.
func Status(tb testing.TB, base string, header http.Header, session string) *memory.Status {
	tb.Helper()
	var st memory.Status
	get(tb, base+"/v1/sessions/"+session, header, &st)
	return &st
}

// CheckReachable asserts that every acknowledged id is among msgs (in the
// window or cold), and a summarized one is listed in a summary's sources.
func CheckReachable(tb testing.TB, msgs []api.Message, acked []string) {
	tb.Helper()
	byID := map[string]api.Message{}
	sources := map[string]bool{}
	for _, m := range msgs {
		byID[m.ID] = m
		if m.Kind == memory.KindSummary {
			for _, s := range m.Sources {
				sources[s] = true
			}
		}
	}
	for _, id := range acked {
		m, ok := byID[id]
		if !ok {
			tb.Fatalf("acknowledged message %s is gone", id)
		}
		if m.State == memory.StateSummarized && !sources[id] {
			tb.Fatalf("summarized message %s is in no summary's sources", id)
		}
	}
}

// CheckCounters asserts a session's status agrees with its messages: counts
// per state, summaries, and no id twice.
func CheckCounters(tb testing.TB, st *memory.Status, msgs []api.Message) {
	tb.Helper()
	var counts memory.Counts
	summaries := 0
	seen := map[string]bool{}
	for _, m := range msgs {
		if seen[m.ID] {
			tb.Fatalf("message %s listed twice", m.ID)
		}
		seen[m.ID] = true
		counts.Add(m.State, 1)
		if m.Kind == memory.KindSummary {
			summaries++
		}
	}
	if st.Messages != counts {
		tb.Fatalf("status says %+v, messages say %+v", st.Messages, counts)
	}
	if st.Summaries != summaries {
		tb.Fatalf("status says %v summaries, messages say %v", st.Summaries, summaries)
	}
}

// CheckTokens asserts that each message's tokens are its exact cost and
// that the status's tokens are the sum over the working window (for
// sessions that hold no tool output long enough to be pruned). It returns
// what the pinned and system messages in the window cost.
func CheckTokens(tb testing.TB, st *memory.Status, msgs []api.Message) (pinned int) {
	tb.Helper()
	window := 0
	for _, m := range msgs {
		if exact := Recount(tb, []api.WindowMessage{{Message: m}}, "") - memory.ReplyPriming; m.Tokens != exact {
			tb.Fatalf("message %s says %d tokens, its content counts %d", m.ID, m.Tokens, exact)
		}
		if !m.State.InWindow() {
			continue
		}
		window += m.Tokens
		if m.Pinned || (m.Role == memory.RoleSystem && m.Kind != memory.KindSummary) {
			pinned += m.Tokens
		}
	}
	if st.Tokens != window {
		tb.Fatalf("session %s says %d tokens, its window's messages add up to %d", st.ID, st.Tokens, window)
	}
	return pinned
}

// testTokenizer is shared: an encoding loads (and is checked against
// tiktoken-go) once per tokenizer, ~0.3 s, which a count per message would
// pay again and again.
var testTokenizer = sync.OnceValue(tokenizer.New)

// Recount counts a returned window exactly, as the client would send it
// (o200k_base, the default encoding), with prompt as a last user message
// when it is not empty.
func Recount(tb testing.TB, msgs []api.WindowMessage, prompt string) int {
	tb.Helper()
	tok := testTokenizer()
	total := memory.ReplyPriming
	if prompt != "" {
		n, _ := memory.MessageTokens(tok, memory.EncodingO200k, &memory.Message{Role: memory.RoleUser, Content: prompt})
		total += n
	}
	for _, m := range msgs {
		wm := &memory.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls}
		n, err := memory.MessageTokens(tok, memory.EncodingO200k, wm)
		if err != nil {
			tb.Fatal(err)
		}
		total += n
	}
	return total
}

// CheckSequence asserts a window is a valid OpenAI chat sequence whose
// every message names its source.
func CheckSequence(tb testing.TB, msgs []api.WindowMessage) {
	tb.Helper()
	open := map[string]bool{}
	seenNonSystem := false
	for i, m := range msgs {
		if m.Role == memory.RoleSystem && seenNonSystem {
			tb.Fatalf("message %d: system message after the conversation started", i)
		}
		if m.Role != memory.RoleSystem {
			seenNonSystem = true
		}
		if m.Role != memory.RoleTool && len(open) > 0 {
			tb.Fatalf("message %d: tool calls %v left without results", i, open)
		}
		switch m.Role {
		case memory.RoleAssistant:
			for _, tc := range m.ToolCalls {
				open[tc.ID] = true
			}
		case memory.RoleTool:
			if !open[m.ToolCallID] {
				tb.Fatalf("message %d: tool result %s without the call before it", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		}
		if m.Source == "" {
			tb.Fatalf("message %d has no source", i)
		}
	}
	if len(open) > 0 {
		tb.Fatalf("window ends with unanswered tool calls %v", open)
	}
}
