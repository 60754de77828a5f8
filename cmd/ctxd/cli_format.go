package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/ctxd/ctxd/api"
)

// barWidth is the number of cells of the context gauge.
const barWidth = 20

// gauge draws a share of the context window: "[##########..........] 52%".
// Past 100% the bar is full and the number says by how much.
func gauge(pct float64) string {
	filled := min(max(int(pct*barWidth), 0), barWidth)
	return fmt.Sprintf("[%s%s] %d%%", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled),
		int(math.Round(pct*100)))
}

// snippet is the first line of text, cut to n characters, for a table cell.
func snippet(text string, n int) string {
	text = strings.TrimSpace(text)
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = strings.TrimSpace(text[:i]) + " …"
	}
	text = strings.ReplaceAll(text, "\t", " ")
	if utf8.RuneCountInString(text) > n {
		r := []rune(text)
		text = string(r[:n-1]) + "…"
	}
	return text
}

// when formats a time for tables: UTC, to the second; "-" if unset.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// table writes aligned columns. Cells must not hold tabs or newlines
// (snippet takes them out of message text).
type table struct{ w *tabwriter.Writer }

func newTable(out io.Writer, header ...string) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(toAny(header)...)
	}
	return t
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.w, "\t")
		}
		fmt.Fprint(t.w, c)
	}
	fmt.Fprintln(t.w)
}

func (t *table) flush() error { return t.w.Flush() }

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// score formats a relevance score.
func score(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }

// shown is what a table shows of a message: its text, or, for an assistant
// turn that only calls tools, the calls ("→ bash {"command":"ls"}"), so
// that no row has an empty CONTENT.
func shown(m api.Message) string {
	if strings.TrimSpace(m.Content) != "" || len(m.ToolCalls) == 0 {
		return m.Content
	}
	calls := make([]string, len(m.ToolCalls))
	for i, c := range m.ToolCalls {
		calls[i] = "→ " + c.Function.Name + " " + strings.Join(strings.Fields(c.Function.Arguments), " ")
	}
	return strings.Join(calls, "; ")
}

// matchSnippet is about n characters of a search hit around its first
// match: the highlight («word» marks the matched terms) from a little
// before the first mark, or the message's start when nothing is marked.
func matchSnippet(r api.SearchResult, n int) string {
	text := r.Highlight
	open := strings.Index(text, "«")
	if open < 0 {
		return snippet(shown(r.Message), n)
	}
	text = strings.Join(strings.Fields(text), " ") // one line
	open = strings.Index(text, "«")
	lead := n / 4
	start := 0
	if before := []rune(text[:open]); len(before) > lead {
		start = len(string(before[:len(before)-lead]))
		if sp := strings.IndexByte(text[start:open], ' '); sp >= 0 {
			start += sp + 1
		}
	}
	out := snippet(text[start:], n)
	if start > 0 {
		out = "…" + out
	}
	return out
}
