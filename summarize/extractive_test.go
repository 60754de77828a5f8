package summarize

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ctxd/ctxd/memory"
)

func extractive(t testing.TB, withEmbedder bool) *Extractive {
	t.Helper()
	if withEmbedder {
		return NewExtractive(testTokenizer(t), testEmbedder(t))
	}
	return NewExtractive(testTokenizer(t), nil)
}

func summarizeText(t testing.TB, s memory.Summarizer, msgs []*memory.Message, target int, prompt string) memory.Summary {
	t.Helper()
	sum, err := s.Summarize(context.Background(), memory.SummaryRequest{Messages: msgs, TargetTokens: target, Encoding: enc, Prompt: prompt})
	if err != nil {
		t.Fatalf("Summarize(target %d): %v", target, err)
	}
	return sum
}

func TestExtractiveDeterministic(t *testing.T) {
	for _, emb := range []bool{true, false} {
		a := summarizeText(t, extractive(t, emb), conversation(), 150, "fix the compaction test")
		for range 5 {
			b := summarizeText(t, extractive(t, emb), conversation(), 150, "fix the compaction test")
			if a != b {
				t.Fatalf("embedder %v: two runs differ:\n%s\n---\n%s", emb, a.Text, b.Text)
			}
		}
		if a.Method != memory.SummaryExtractive || a.Note != "" {
			t.Errorf("method %q note %q", a.Method, a.Note)
		}
	}
}

func TestExtractiveFitsTarget(t *testing.T) {
	convs := map[string][]*memory.Message{"conversation": conversation(), "bench": benchMessages(20), "unicode": unicodeMessages()}
	for name, msgs := range convs {
		for _, emb := range []bool{true, false} {
			for _, target := range []int{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 5000} {
				s := summarizeText(t, extractive(t, emb), msgs, target, "")
				if n := count(t, s.Text); n > target || s.Text == "" && target >= 3 {
					t.Errorf("%s emb=%v target %d: %d tokens: %q", name, emb, target, n, s.Text)
				}
				if !utf8.ValidString(s.Text) {
					t.Errorf("%s target %d: invalid UTF-8", name, target)
				}
			}
		}
	}
}

func TestExtractiveKeepsWhatMatters(t *testing.T) {
	msgs := []*memory.Message{
		msg(0, memory.RoleUser, "I was thinking about the general shape of things and how they tend to go in projects like this one."),
		msg(1, memory.RoleAssistant, "Yes, projects like this one tend to go in a general shape, and thinking about things is usually good."),
		msg(2, memory.RoleUser, "The flaky test is TestRecoverCold in memory/cold_test.go, see https://ci.example.com/runs/4812 (exit 137)."),
		msg(3, memory.RoleAssistant, "In general, things in projects tend to take the shape they take, and that is usually how it goes."),
		msg(4, memory.RoleUser, "It is good to think about the shape of projects in general and how things tend to go."),
	}
	for _, emb := range []bool{true, false} {
		s := summarizeText(t, extractive(t, emb), msgs, 60, "")
		for _, want := range []string{"user: The flaky test is TestRecoverCold in memory/cold_test.go, see https://ci.example.com/runs/4812 (exit 137)."} {
			if !strings.Contains(s.Text, want) {
				t.Errorf("emb=%v: summary lost %q:\n%s", emb, want, s.Text)
			}
		}
	}
}

func TestExtractiveSpeakers(t *testing.T) {
	s := summarizeText(t, extractive(t, true), conversation(), 400, "")
	for _, want := range []string{
		"\nalice: TODO: we need to fix PROJ-481 before the 2026-01-15 release, and we must not change the on-disk format.",
		"\nuser: The compactor in memory/compact.go drops messages when the window passes 80% of max_window_tokens. We decided to keep pinned messages always.",
		"\nassistant: read_file({\"path\": \"memory/compact.go\"})", // assistant message with tool_calls only
		"\nread_file: package memory (tool output, 19 tokens)",
	} {
		if !strings.Contains(s.Text, want) {
			t.Errorf("summary lacks %q:\n%s", want, s.Text)
		}
	}
	if !strings.HasPrefix(s.Text, "Summary of 10 messages (2026-01-02 10:00 – 10:09 UTC):\n") {
		t.Errorf("header: %q", strings.SplitN(s.Text, "\n", 2)[0])
	}
	if strings.Contains(s.Text, "sounds good") || strings.Contains(s.Text, "Hi there!") {
		t.Errorf("filler kept:\n%s", s.Text)
	}
}

func TestExtractivePrefersPromptTerms(t *testing.T) {
	msgs := []*memory.Message{
		msg(0, memory.RoleUser, "The billing service retries invoices three times before it gives up."),
		msg(1, memory.RoleUser, "The search service caches results for three minutes before it refreshes."),
	}
	for _, prompt := range []string{"billing invoices", "search cache results"} {
		s := summarizeText(t, extractive(t, true), msgs, 35, prompt)
		word := strings.Fields(prompt)[0]
		if !strings.Contains(s.Text, word) {
			t.Errorf("prompt %q: summary lacks %q:\n%s", prompt, word, s.Text)
		}
	}
}

func TestExtractiveToolOutput(t *testing.T) {
	out := "=== RUN   TestCompact\n" + strings.Repeat("some ordinary log line about progress\n", 200) +
		"compact_test.go:42: expected 3 messages, got 2\n--- FAIL: TestCompact (0.01s)\nFAIL\texit status 1\n"
	m := &memory.Message{Role: memory.RoleTool, Name: "go_test", Content: out, Tokens: 1234, CreatedAt: t0}
	s := summarizeText(t, extractive(t, true), []*memory.Message{m}, 120, "")
	for _, want := range []string{"go_test: === RUN TestCompact", "compact_test.go:42: expected 3 messages, got 2", "--- FAIL: TestCompact (0.01s)", "(tool output, 1234 tokens)"} {
		if !strings.Contains(strings.Join(strings.Fields(s.Text), " "), want) {
			t.Errorf("summary lacks %q:\n%s", want, s.Text)
		}
	}
	if strings.Contains(s.Text, "ordinary log line") {
		t.Errorf("kept a plain output line:\n%s", s.Text)
	}
}

func TestExtractiveHugeMessage(t *testing.T) {
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "Paragraph %d talks about the weather and other things of little consequence. ", i)
		if i == 1234 {
			b.WriteString("The deploy key is stored at /srv/keys/deploy_ed25519 and rotates every 90 days. ")
		}
	}
	m := msg(0, memory.RoleUser, b.String())
	s := summarizeText(t, extractive(t, true), []*memory.Message{m}, 100, "")
	if n := count(t, s.Text); n > 100 {
		t.Fatalf("%d tokens", n)
	}
	if !strings.Contains(s.Text, "The deploy key is stored at /srv/keys/deploy_ed25519 and rotates every 90 days.") {
		t.Errorf("lost the key sentence:\n%s", s.Text)
	}

	// One sentence longer than the budget, and nothing else: cut at a word.
	m = msg(0, memory.RoleUser, strings.Repeat("lorem ipsum dolor sit amet ", 3000))
	s = summarizeText(t, extractive(t, false), []*memory.Message{m}, 60, "")
	if n := count(t, s.Text); n > 60 || !strings.HasSuffix(s.Text, "…") || !strings.Contains(s.Text, "\nuser: lorem ipsum") {
		t.Errorf("%d tokens: %q", n, s.Text)
	}
	for _, w := range strings.Fields(strings.TrimSuffix(s.Text[strings.Index(s.Text, "lorem"):], "…")) {
		if !strings.Contains("lorem ipsum dolor sit amet", w) {
			t.Errorf("cut inside a word: %q", w)
		}
	}
}

func TestExtractiveTinyTargets(t *testing.T) {
	for _, target := range []int{1, 2, 4, 10} {
		s := summarizeText(t, extractive(t, true), conversation(), target, "")
		if n := count(t, s.Text); n > target || s.Text == "" {
			t.Errorf("target %d: %d tokens %q", target, n, s.Text)
		}
	}
}

func TestExtractiveToolCallsOnly(t *testing.T) {
	m := &memory.Message{Role: memory.RoleAssistant, CreatedAt: t0, ToolCalls: []memory.ToolCall{
		{ID: "c1", Function: memory.FunctionCall{Name: "grep", Arguments: `{"pattern": "TODO", "path": "memory/"}`}},
		{ID: "c2", Function: memory.FunctionCall{Name: "write_file", Arguments: `{"path": "a.txt", "content": "` + strings.Repeat("x", 1000) + `"}`}},
	}}
	s := summarizeText(t, extractive(t, true), []*memory.Message{m}, 200, "")
	want := "Summary of 1 message (2026-01-02 10:00 UTC):\nassistant: grep({\"pattern\": \"TODO\", \"path\": \"memory/\"}) write_file({\"path\": \"a.txt\", \"content\": \"xxx"
	if !strings.HasPrefix(s.Text, want) || !strings.HasSuffix(s.Text, "…)") {
		t.Errorf("got %q", s.Text)
	}
}

func unicodeMessages() []*memory.Message {
	return []*memory.Message{
		msg(0, memory.RoleUser, "我们决定使用 bbolt 存储。下一步：修复 memory/store.go 里的错误！这个问题什么时候解决？"),
		msg(1, memory.RoleAssistant, "Ça marche : la version 1.4.2 corrige le bogue n° 42. L’équipe de François l’a validée 🎉."),
		msg(2, memory.RoleUser, "Добавь тест для функции parseHeader, пожалуйста. Это важно 👍"),
	}
}

func TestExtractiveUnicode(t *testing.T) {
	s := summarizeText(t, extractive(t, true), unicodeMessages(), 300, "")
	for _, want := range []string{"我们决定使用 bbolt 存储。", "la version 1.4.2 corrige le bogue n° 42.", "parseHeader"} {
		if !strings.Contains(s.Text, want) {
			t.Errorf("lacks %q:\n%s", want, s.Text)
		}
	}
	s = summarizeText(t, extractive(t, true), unicodeMessages(), 30, "")
	if n := count(t, s.Text); n > 30 || !utf8.ValidString(s.Text) {
		t.Errorf("%d tokens %q", n, s.Text)
	}
}

func TestExtractiveRefusesBadRequests(t *testing.T) {
	e := extractive(t, false)
	for _, req := range []memory.SummaryRequest{
		{Messages: conversation(), TargetTokens: 0, Encoding: enc},
		{Messages: nil, TargetTokens: 10, Encoding: enc},
		{Messages: conversation(), TargetTokens: 10, Encoding: "p50k_base"},
	} {
		if _, err := e.Summarize(context.Background(), req); err == nil {
			t.Errorf("%+v: no error", req)
		}
	}
}

type failingEmbedder struct{}

func (failingEmbedder) Model() string { return "broken" }
func (failingEmbedder) Dim() int      { return 3 }
func (failingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("model server down")
}

func TestExtractiveEmbedderFailure(t *testing.T) {
	s := summarizeText(t, NewExtractive(testTokenizer(t), failingEmbedder{}), conversation(), 150, "")
	want := summarizeText(t, extractive(t, false), conversation(), 150, "")
	if s.Text != want.Text || !strings.Contains(s.Note, "model server down") {
		t.Errorf("got %q note %q", s.Text, s.Note)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewExtractive(testTokenizer(t), testEmbedder(t)).Summarize(ctx, memory.SummaryRequest{Messages: conversation(), TargetTokens: 100, Encoding: enc}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestTranscript(t *testing.T) {
	got := Transcript(conversation()[2:6])
	want := "user: Great, thanks. The compactor in memory/compact.go drops messages when the window passes 80% of max_window_tokens. We decided to keep pinned messages always.\n" +
		"assistant: That makes a lot of sense to me. Generally it is a good idea to think carefully about these kinds of things. I will look at the code now.\n" +
		"assistant: read_file({\"path\": \"memory/compact.go\"})\n" +
		"read_file: package memory\n\nimport \"context\"\n\nfunc Compact(ctx context.Context) error {\n\treturn nil\n}"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFit(t *testing.T) {
	f := fitter{tok: testTokenizer(t), enc: enc}
	text := "First line stays whole.\nSecond line is here. It has two sentences.\nThird."
	for max := range 30 {
		got, err := f.fit(text, max)
		if err != nil {
			t.Fatal(err)
		}
		if n := count(t, got); n > max {
			t.Errorf("max %d: %d tokens %q", max, n, got)
		}
		if !strings.HasPrefix(text, strings.TrimSuffix(got, "…")) {
			t.Errorf("max %d: not a prefix: %q", max, got)
		}
	}
	if got, _ := f.fit(text, 12); got != "First line stays whole." {
		t.Errorf("line cut: %q", got)
	}
}

func TestExtractiveResummarizes(t *testing.T) {
	e := extractive(t, true)
	first := summarizeText(t, e, conversation(), 150, "")
	sum := &memory.Message{Role: memory.RoleAssistant, Kind: memory.KindSummary, Content: first.Text, CreatedAt: t0.Add(10 * time.Minute)}
	next := append([]*memory.Message{sum}, msg(11, memory.RoleUser, "Next we will ship release v2.3.0 on Friday."))
	s := summarizeText(t, e, next, 160, "")
	for _, want := range []string{"\nalice: TODO: we need to fix PROJ-481", "\nuser: Next we will ship release v2.3.0 on Friday."} {
		if !strings.Contains(s.Text, want) {
			t.Errorf("lacks %q:\n%s", want, s.Text)
		}
	}
	if strings.Contains(s.Text, "Summary of 10") || strings.Contains(s.Text, "summary: ") {
		t.Errorf("kept the old header or lost attribution:\n%s", s.Text)
	}
	if got := Transcript(next[:1]); !strings.HasPrefix(got, "summary: Summary of 10 messages") {
		t.Errorf("transcript: %q", got)
	}
}
