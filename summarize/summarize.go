// Package summarize implements memory.Summarizer twice: an extractive
// summarizer that needs nothing but a tokenizer (and optionally an embedder),
// and an LLM summarizer over any OpenAI-compatible chat endpoint that falls
// back to the extractive one when the endpoint fails.
package summarize

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ctxd/ctxd/memory"
)

// Transcript renders messages as "speaker: content" lines, one block per
// message, with each tool call on its own line as name(args). It is what the
// LLM reads, and its speaker convention is the one the extractive summary
// uses, so both kinds of summary attribute statements the same way.
func Transcript(msgs []*memory.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if m == nil {
			continue
		}
		block := messageBlock(m)
		if block == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(block)
	}
	return b.String()
}

// messageBlock is one message's part of the transcript.
func messageBlock(m *memory.Message) string {
	sp := speaker(m)
	var b strings.Builder
	if c := strings.TrimSpace(m.Content); c != "" {
		b.WriteString(sp)
		b.WriteString(": ")
		b.WriteString(c)
	}
	for _, tc := range m.ToolCalls {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(sp)
		b.WriteString(": ")
		b.WriteString(toolCallText(tc, 0))
	}
	return b.String()
}

// speaker names who wrote m: a name says more than a role ("alice" rather
// than "user", "read_file" rather than "tool"). A summary the server wrote
// is no one's words.
func speaker(m *memory.Message) string {
	if m.IsSummary() {
		return "summary"
	}
	if n := strings.TrimSpace(m.Name); n != "" {
		return n
	}
	if m.Role == "" {
		return "unknown"
	}
	return string(m.Role)
}

// toolCallText renders a call as name(args) with the arguments' whitespace
// collapsed. maxArgs > 0 cuts longer arguments (at a rune boundary, marked
// with "…"): a file body passed to write_file is not worth a summary's budget.
func toolCallText(tc memory.ToolCall, maxArgs int) string {
	args := strings.Join(strings.Fields(tc.Function.Arguments), " ")
	if maxArgs > 0 && len(args) > maxArgs {
		cut := maxArgs
		for cut > 0 && !utf8.RuneStart(args[cut]) {
			cut--
		}
		args = args[:cut] + "…"
	}
	return tc.Function.Name + "(" + args + ")"
}

// timeRange describes when msgs were written, in UTC: "2026-01-02 10:00 –
// 10:30 UTC", the date repeated only when the run spans days. Messages
// without a time are ignored; "" if none has one.
func timeRange(msgs []*memory.Message) string {
	var lo, hi time.Time
	for _, m := range msgs {
		if m == nil || m.CreatedAt.IsZero() {
			continue
		}
		t := m.CreatedAt.UTC()
		if lo.IsZero() || t.Before(lo) {
			lo = t
		}
		if hi.IsZero() || t.After(hi) {
			hi = t
		}
	}
	if lo.IsZero() {
		return ""
	}
	const day, minute = "2006-01-02 15:04", "15:04"
	switch {
	case lo.Truncate(time.Minute).Equal(hi.Truncate(time.Minute)):
		return lo.Format(day) + " UTC"
	case lo.YearDay() == hi.YearDay() && lo.Year() == hi.Year():
		return lo.Format(day) + " – " + hi.Format(minute) + " UTC"
	default:
		return lo.Format(day) + " – " + hi.Format(day) + " UTC"
	}
}

// countMessages counts the non-nil messages, the N of "N messages".
func countMessages(msgs []*memory.Message) int {
	n := 0
	for _, m := range msgs {
		if m != nil {
			n++
		}
	}
	return n
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// header opens an extractive summary.
func header(msgs []*memory.Message) string {
	h := "Summary of " + plural(countMessages(msgs), "message")
	if tr := timeRange(msgs); tr != "" {
		h += " (" + tr + ")"
	}
	return h + ":"
}

// annotation stands in for a summary when no summarizer could write one: it
// still tells the reader that something was here and when.
func annotation(msgs []*memory.Message) string {
	s := "[" + plural(countMessages(msgs), "message")
	if tr := timeRange(msgs); tr != "" {
		s += ", " + tr
	}
	return s + ", summary unavailable]"
}

// validateRequest refuses requests no summarizer can answer. Count of a
// non-empty text checks the encoding (Count("") succeeds for any name).
func validateRequest(tok memory.Tokenizer, req memory.SummaryRequest) error {
	if req.TargetTokens < 1 {
		return memory.Errorf(memory.EINVALID, "summarize: target_tokens must be positive, not %d", req.TargetTokens)
	}
	if countMessages(req.Messages) == 0 {
		return memory.Errorf(memory.EINVALID, "summarize: no messages")
	}
	if _, err := tok.Count(req.Encoding, "x"); err != nil {
		return fmt.Errorf("summarize: %w", err)
	}
	return nil
}

// fitter cuts text to an exact token budget.
type fitter struct {
	tok memory.Tokenizer
	enc string
}

func (f fitter) count(s string) (int, error) {
	n, err := f.tok.Count(f.enc, s)
	if err != nil {
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	return n, nil
}

// maxBytesPerToken bounds how far fit searches: no prefix longer than this
// many bytes per token of budget is tried. Real tokens are far shorter, and
// the bound keeps cutting a megabyte of minified JSON to a few tokens cheap.
const maxBytesPerToken = 64

// fit returns the longest prefix of text that fits max tokens, cutting at the
// coarsest boundary that keeps something: whole lines, then whole sentences
// of the first line, then words (marked "…"), then runes. Cutting at lines
// and sentences first keeps identifiers whole whenever anything can.
func (f fitter) fit(text string, max int) (string, error) {
	text = strings.TrimSpace(text)
	n, err := f.count(text)
	if err != nil || n <= max {
		return text, err
	}
	if max < 1 {
		return "", nil
	}
	limit := max*maxBytesPerToken + 16
	var ends []int
	for i := 0; i < len(text); {
		j := strings.IndexByte(text[i:], '\n')
		if j < 0 {
			break // the whole text does not fit
		}
		ends = append(ends, i+j)
		i += j + 1
	}
	plain := func(s string) func(int) string {
		return func(end int) string { return strings.TrimSpace(s[:end]) }
	}
	if out, err := f.longest(ends, limit, max, plain(text)); err != nil || out != "" {
		return out, err
	}
	first := text
	if len(ends) > 0 {
		first = strings.TrimSpace(text[:ends[0]])
	}
	ends = ends[:0]
	at := 0
	for _, s := range splitSentences(first) {
		i := strings.Index(first[at:], s)
		if i < 0 {
			break // cannot happen: sentences are trimmed substrings, in order
		}
		at += i + len(s)
		ends = append(ends, at)
	}
	if len(ends) > 0 && ends[len(ends)-1] == len(first) {
		ends = ends[:len(ends)-1] // the whole line does not fit
	}
	if out, err := f.longest(ends, limit, max, plain(first)); err != nil || out != "" {
		return out, err
	}
	return f.cutWords(first, max, limit)
}

// cutWords keeps as many whole words of s as fit with a trailing "…", or
// failing that as many runes (a single word may be longer than the budget).
func (f fitter) cutWords(s string, max, limit int) (string, error) {
	var ends []int
	inWord := false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if space && inWord {
			ends = append(ends, i)
		}
		inWord = !space
	}
	if inWord {
		ends = append(ends, len(s))
	}
	words := func(end int) string { return strings.TrimRight(s[:end], ",;:") + "…" }
	if out, err := f.longest(ends, limit, max, words); err != nil || out != "" {
		return out, err
	}
	ends = ends[:0]
	for i := range s {
		if i > 0 {
			ends = append(ends, i)
		}
	}
	return f.longest(append(ends, len(s)), limit, max, func(end int) string { return s[:end] })
}

// longest renders the prefixes ending at ends (ascending, those beyond
// limit bytes ignored) and returns the longest whose count is <= max, found
// by binary search, or "" if none fits. A longer prefix of the same text
// practically never has fewer tokens, so the search is sound; what it returns
// was counted, so the budget holds even if it were not.
func (f fitter) longest(ends []int, limit, max int, render func(end int) string) (string, error) {
	n := len(ends)
	for n > 0 && ends[n-1] > limit {
		n--
	}
	lo, hi := 0, n
	best := ""
	for lo < hi {
		mid := (lo + hi + 1) / 2
		out := render(ends[mid-1])
		c, err := f.count(out)
		if err != nil {
			return "", err
		}
		if c <= max {
			lo, best = mid, out
		} else {
			hi = mid - 1
		}
	}
	return best, nil
}
