package tokenizer_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/tokenizer"
)

// One tokenizer per fuzz process: building an encoding takes 60-250 ms.
var (
	fuzzOnce sync.Once
	fuzzTok  *tokenizer.Tokenizer
)

func fuzzTokenizer() *tokenizer.Tokenizer {
	fuzzOnce.Do(func() { fuzzTok = tokenizer.New() })
	return fuzzTok
}

var encodings = []string{memory.EncodingO200k, memory.EncodingCL100k}

var textSeeds = []string{
	"", "hello world", " ", "\n\n\n", "<|endoftext|>", "<|im_start|>user<|im_end|>", "\x00", "a\x00b", "\xff\xfe",
	"\xc0\xaf", "\xed\xa0\xbd", "😀👩‍👩‍👧‍👦", "\u202eevil", "日本語のテキスト", strings.Repeat("a", 10000),
	strings.Repeat(" ", 5000), strings.Repeat("😀", 1000), strings.Repeat("\xff", 1000), "{\"a\": [1, 2, {\"b\": null}]}",
	"    def f(x):\n\treturn x**2  # ünïcödé", strings.Repeat("ab12", 3000),
}

// Any bytes count: no panic, no error, a positive count for non-empty text,
// and no more tokens than bytes (every token covers at least one byte).
func FuzzCount(f *testing.F) {
	for i, s := range textSeeds {
		f.Add(s, uint8(i))
	}
	f.Fuzz(func(t *testing.T, text string, e uint8) {
		enc := encodings[int(e)%len(encodings)]
		n, err := fuzzTokenizer().Count(enc, text)
		if err != nil {
			t.Fatalf("Count(%s, %q): %v", enc, text, err)
		}
		if (n > 0) != (text != "") || n > len(text) {
			t.Fatalf("Count(%s, %q) = %d for %d bytes", enc, text, n, len(text))
		}
		// Counting is a pure function of the text.
		if again, _ := fuzzTokenizer().Count(enc, text); again != n {
			t.Fatalf("Count(%s, %q) = %d then %d", enc, text, n, again)
		}
	})
}

// A message's cost is its parts' tokens plus the fixed overheads: never
// less than the overhead, and more for any text it carries.
func FuzzMessageTokens(f *testing.F) {
	f.Add("user", "hello", "", "", "", "", "", uint8(0))
	f.Add("assistant", "", "", "", "call_1", "ls", `{"path":"/tmp"}`, uint8(1))
	f.Add("tool", "a.txt b.txt", "", "call_1", "", "", "", uint8(0))
	f.Add("robot", "<|endoftext|>", "bob\x00", "\xff", "\xed\xa0\x80", "f", strings.Repeat("{", 500), uint8(1))
	f.Fuzz(func(t *testing.T, role, content, name, toolCallID, callID, fn, args string, e uint8) {
		enc := encodings[int(e)%len(encodings)]
		m := &memory.Message{Role: memory.Role(role), Content: content, Name: name, ToolCallID: toolCallID}
		if callID != "" || fn != "" || args != "" {
			m.ToolCalls = []memory.ToolCall{{ID: callID, Type: "function", Function: memory.FunctionCall{Name: fn, Arguments: args}}}
		}
		n, err := memory.MessageTokens(fuzzTokenizer(), enc, m)
		if err != nil {
			t.Fatalf("MessageTokens: %v", err)
		}
		floor := memory.MessageOverhead
		if name != "" {
			floor += memory.NameOverhead
		}
		floor += memory.MessageOverhead * len(m.ToolCalls)
		text := role + content + name + toolCallID + callID + fn + args
		if n < floor || (text != "" && n == floor) || n > floor+len(text) {
			t.Fatalf("MessageTokens(%+v) = %d, overheads %d, %d bytes of text", m, n, floor, len(text))
		}
	})
}
