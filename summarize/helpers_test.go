package summarize

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/index/glove"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/tokenizer"
)

const enc = memory.EncodingO200k

var (
	tokOnce sync.Once
	tok     *tokenizer.Tokenizer
)

func testTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tokOnce.Do(func() { tok = tokenizer.New() })
	return tok
}

func testEmbedder(t testing.TB) *glove.Model {
	t.Helper()
	m, err := glove.Default()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func count(t testing.TB, s string) int {
	t.Helper()
	n, err := testTokenizer(t).Count(enc, s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var t0 = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)

func msg(i int, role memory.Role, content string) *memory.Message {
	return &memory.Message{
		ID: fmt.Sprintf("m%03d", i), Seq: uint64(i + 1), Role: role, Content: content,
		CreatedAt: t0.Add(time.Duration(i) * time.Minute), State: memory.StateActive,
	}
}

// conversation is a working session with filler around a few sentences that
// carry what a summary must keep.
func conversation() []*memory.Message {
	c := []*memory.Message{
		msg(0, memory.RoleUser, "Hi there! I hope you are having a good day. Can you help me with the compaction work today?"),
		msg(1, memory.RoleAssistant, "Of course, I would be happy to help with that. It sounds like an interesting problem to work on together."),
		msg(2, memory.RoleUser, "Great, thanks. The compactor in memory/compact.go drops messages when the window passes 80% of max_window_tokens. We decided to keep pinned messages always."),
		msg(3, memory.RoleAssistant, "That makes a lot of sense to me. Generally it is a good idea to think carefully about these kinds of things. I will look at the code now."),
		{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: "call_1", Type: "function", Function: memory.FunctionCall{Name: "read_file", Arguments: `{"path": "memory/compact.go"}`}}}, CreatedAt: t0.Add(4 * time.Minute)},
		{Role: memory.RoleTool, Name: "read_file", ToolCallID: "call_1", Content: "package memory\n\nimport \"context\"\n\nfunc Compact(ctx context.Context) error {\n\treturn nil\n}\n", CreatedAt: t0.Add(5 * time.Minute)},
		msg(6, memory.RoleAssistant, "The test TestCompactKeepsPinned failed with error: expected 3 messages, got 2 (see https://ci.example.com/runs/4812)."),
		msg(7, memory.RoleUser, "Okay, sounds good. Let me know how it goes, I am curious to hear what you find."),
		msg(8, memory.RoleUser, "TODO: we need to fix PROJ-481 before the 2026-01-15 release, and we must not change the on-disk format."),
		msg(9, memory.RoleAssistant, "Sure, that seems reasonable and I think it will work out well in the end."),
	}
	c[8].Name = "alice"
	return c
}

// benchMessages is n messages of about 60 words: ordinary prose with the
// odd identifier, path, number and decision, as a working session has.
func benchMessages(n int) []*memory.Message {
	words := strings.Fields(`the we need to check how index handles deletes when session is large and
		then compare results with baseline before merging change into main branch because tests were slow
		yesterday after upgrade so maybe cache warms too late or tokenizer builds twice per request under load`)
	extras := []string{"memory/compact.go", "PROJ-412", "max_window_tokens", "https://ci.example.com/runs/77",
		"we decided to keep bbolt", "TODO: add a benchmark", "3f2a9c1d", "must not block writers", "is 1.5 s too slow?"}
	msgs := make([]*memory.Message, n)
	x := uint32(2463534242)
	for i := range msgs {
		var b strings.Builder
		for w := 0; w < 60; w++ {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			switch {
			case x%23 == 0:
				b.WriteString(extras[x%uint32(len(extras))])
			default:
				b.WriteString(words[x%uint32(len(words))])
			}
			if x%9 == 0 {
				b.WriteString(". ")
			} else {
				b.WriteByte(' ')
			}
		}
		role := memory.RoleUser
		if i%2 == 1 {
			role = memory.RoleAssistant
		}
		msgs[i] = msg(i, role, b.String())
	}
	return msgs
}
