package memory_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// repeatSession plays an agent's session on g: each call resends the
// history with the stored answer and its tool's result added, and at call
// 6 the client clears an old tool output. With hints, each call says
// which of its leading messages repeat the last call's, as the adapters
// do. It answers each call's window, shown, and how many messages each
// call matched.
func repeatSession(t *testing.T, g *memory.Gateway, hints bool) (windows []string, matched []int) {
	t.Helper()
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	history := []*memory.Message{{Role: memory.RoleSystem, Content: "You are a coding agent."},
		{Role: memory.RoleUser, Content: "read every file of the project and say what it does"}}
	repeats := 0 // of the history's messages not standing system messages
	for call := 1; call <= 10; call++ {
		if call == 6 {
			history[3] = &memory.Message{Role: memory.RoleTool, ToolCallID: history[3].ToolCallID, Content: "[Old tool result content cleared]"}
			repeats = 2 // the user's question and the first call
		}
		req := memory.GatewayRequest{Session: "s", History: history, ContextWindow: 3000, Reserve: 500}
		if hints {
			req.Repeat = memory.HistoryRepeat{Call: uint64(call), Of: uint64(call - 1), N: repeats}
		}
		w, err := g.Prepare(ctx, req)
		if err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		shown := fmt.Sprintf("stored %d, superseded %d, %d tokens:", w.Stored, len(w.Superseded), w.Tokens)
		for _, m := range w.Messages {
			shown += fmt.Sprintf(" [%s %s %d/%d %.40q]", m.Role, m.ToolCallID, m.Client, m.Origin, m.Content)
		}
		windows, matched = append(windows, shown), append(matched, w.Matched)
		id := fmt.Sprintf("c%d", call)
		answer := &memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: id, Type: "function",
			Function: memory.FunctionCall{Name: "read", Arguments: fmt.Sprintf(`{"path":"file%d.go"}`, call)}}}}
		if _, err := g.StoreAnswer(ctx, "s", answer); err != nil {
			t.Fatal(err)
		}
		repeats = len(history) - 1
		history = append(history, answer, &memory.Message{Role: memory.RoleTool, ToolCallID: id,
			Content: strings.Repeat(fmt.Sprintf("line %d of file%d.go\n", call, call), 40)})
	}
	return windows, matched
}

// A call whose history repeats the last call's validates and matches only
// the messages after the repeated part (and the system prompt, matched as
// a set), and builds the same windows, storing and superseding the same
// messages, as a call that reads the whole history.
func TestGatewayRepeatedHistoryReadOnce(t *testing.T) {
	t.Parallel()
	whole, wholeMatched := repeatSession(t, memory.NewGateway(memorytest.Open(t).Service), false)
	told, toldMatched := repeatSession(t, memory.NewGateway(memorytest.Open(t).Service), true)
	for i := range whole {
		if told[i] != whole[i] {
			t.Errorf("call %d's window, told what repeats:\n%s\nread whole:\n%s", i+1, told[i], whole[i])
		}
	}
	for i, n := range wholeMatched {
		size := 2 + 2*i // the history's messages
		want := size - (size - 3)
		switch i {
		case 0:
			want = 2 // nothing before it
		case 5:
			want = size - 2 // from the cleared output on
		}
		if n != size {
			t.Errorf("call %d, read whole: matched %d messages, want all %d", i+1, n, size)
		}
		if toldMatched[i] != want {
			t.Errorf("call %d, told what repeats: matched %d messages of %d, want %d", i+1, toldMatched[i], size, want)
		}
	}
}

// What a call says repeats is taken only from the session's last call: a
// stale or foreign call id, or a claim made for a call that never came,
// reads the whole history, and refuses a bad message in it.
func TestGatewayRepeatOfAnotherCallReadsWhole(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	g := memory.NewGateway(h.Service)
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	history := []*memory.Message{{Role: memory.RoleUser, Content: "first question"}}
	if _, err := g.Prepare(ctx, memory.GatewayRequest{Session: "s", History: history, ContextWindow: 3000, Reserve: 500,
		Repeat: memory.HistoryRepeat{Call: 7}}); err != nil {
		t.Fatal(err)
	}
	history = append(history, &memory.Message{Role: memory.RoleAssistant, Content: "an answer"},
		&memory.Message{Role: memory.RoleUser, Content: "second question"})
	for _, of := range []uint64{0, 6, 8} {
		w, err := g.Prepare(ctx, memory.GatewayRequest{Session: "s", History: history, ContextWindow: 3000, Reserve: 500,
			Repeat: memory.HistoryRepeat{Call: 9, Of: of, N: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if w.Matched != len(history) {
			t.Errorf("told call %d repeats (the last was 7, then 9): matched %d, want all %d", of, w.Matched, len(history))
		}
	}
	bad := []*memory.Message{{Role: "narrator", Content: "first question"}, {Role: memory.RoleUser, Content: "third question"}}
	for _, of := range []uint64{7, 0} {
		_, err := g.Prepare(ctx, memory.GatewayRequest{Session: "s", History: bad, ContextWindow: 3000, Reserve: 500,
			Repeat: memory.HistoryRepeat{Call: 10, Of: of, N: 1}})
		if memory.ErrorCode(err) != memory.EINVALID {
			t.Fatalf("a bad role in a part said to repeat call %d, not the last: %v, want refused", of, err)
		}
	}
	_, err := memory.NewGateway(h.Service).Prepare(ctx, memory.GatewayRequest{Session: "new", History: bad, ContextWindow: 3000, Reserve: 500,
		Repeat: memory.HistoryRepeat{Call: 1, N: 1}})
	if memory.ErrorCode(err) != memory.EINVALID {
		t.Fatalf("a bad role in a part said to repeat no call, on a gateway with no state: %v, want refused", err)
	}
	if _, err := h.Store.Session(ctx, "t", "new"); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("a refused call left its session behind (%v)", err)
	}
}

// Prepare leaves the client's messages as the adapter gave them, whether
// it stores them, matches them or supersedes what they replace: the
// adapter gives the same decoded messages to the next call that resends
// them, and a message stored by one call (its id, counts and vector set)
// would reach the next as another.
func TestGatewayPrepareLeavesHistoryAsSent(t *testing.T) {
	g := memory.NewGateway(memorytest.Open(t).Service)
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	history := []*memory.Message{{Role: memory.RoleSystem, Content: "You are a coding agent."},
		{Role: memory.RoleUser, Content: "read the parser", Metadata: map[string]any{"k": "v"}},
		{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "c1", Type: "function",
			Function: memory.FunctionCall{Name: "read", Arguments: `{"path":"parse.go"}`}}}},
		{Role: memory.RoleTool, ToolCallID: "c1", Content: "package parse"}}
	for call, h := range [][]*memory.Message{history, history, {history[0], {Role: memory.RoleUser, Content: "something else"}}} {
		sent := make([]memory.Message, len(h))
		for i, m := range h {
			sent[i] = *m
			sent[i].ToolCalls = slices.Clone(m.ToolCalls)
			sent[i].Metadata = maps.Clone(m.Metadata)
		}
		if _, err := g.Prepare(ctx, memory.GatewayRequest{Session: "s", History: h, ContextWindow: 3000, Reserve: 500}); err != nil {
			t.Fatal(err)
		}
		for i, m := range h {
			if !reflect.DeepEqual(*m, sent[i]) {
				t.Errorf("call %d changed history[%d]:\n%+v\nwas sent as\n%+v", call+1, i, *m, sent[i])
			}
		}
	}
}
