package summarize

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ctxd/ctxd/memory"
)

const (
	// maxToolErrorLines bounds how many error lines of one tool output are
	// candidates: a 200-frame stack trace is one error, not 200.
	maxToolErrorLines = 8
	// maxToolArgBytes bounds a tool call's arguments in the summary.
	maxToolArgBytes = 200
	// maxPromptTerms bounds the prompt terms a sentence is scored against.
	maxPromptTerms = 32
	// A unit whose cosine to a chosen one exceeds simFloor loses up to
	// wRedundant (at cosine 1) of its score: related sentences are fine,
	// repeats are not.
	simFloor   = 0.5
	wRedundant = 1.0
)

// Extractive summarizes by picking the sentences that matter most, verbatim.
// It needs no network and is deterministic: the same request (and the same
// embedder) gives the same text.
type Extractive struct {
	tok memory.Tokenizer
	emb memory.Embedder
}

var _ memory.Summarizer = (*Extractive)(nil)

// NewExtractive returns an extractive summarizer. tok is required; emb may
// be nil: centrality is then measured by shared terms, not embeddings.
func NewExtractive(tok memory.Tokenizer, emb memory.Embedder) *Extractive {
	return &Extractive{tok: tok, emb: emb}
}

// unit is one candidate sentence (or tool-call, or tool-output line).
type unit struct {
	line  int // index of its line in the summary
	text  string
	feat  features
	cost  int // tokens it adds to its message's line
	score float64
}

// line is one line of the summary: a message, or a speaker's part of an
// earlier summary.
type line struct {
	speaker string
	note    string // "(tool output, N tokens)" for tool messages
	cost    int    // tokens of the line without its units
}

// Summarize implements memory.Summarizer.
func (e *Extractive) Summarize(ctx context.Context, req memory.SummaryRequest) (memory.Summary, error) {
	if err := validateRequest(e.tok, req); err != nil {
		return memory.Summary{}, err
	}
	if err := ctx.Err(); err != nil {
		return memory.Summary{}, fmt.Errorf("summarize: %w", err)
	}
	f := fitter{tok: e.tok, enc: req.Encoding}
	units, lines, err := e.candidates(f, req.Messages)
	if err != nil {
		return memory.Summary{}, err
	}
	head := header(req.Messages)
	if len(units) == 0 {
		text, err := f.fit(head, req.TargetTokens)
		return memory.Summary{Text: text, Method: memory.SummaryExtractive}, err
	}
	sp, note, err := e.score(ctx, units, req.Prompt)
	if err != nil {
		return memory.Summary{}, err
	}
	order := make([]int, len(units))
	for i := range order {
		order[i] = i
	}
	// Stable on position: equal scores go to the earlier sentence.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(units[b].score, units[a].score) })

	text, err := e.pick(f, head, units, lines, order, sp, req.TargetTokens)
	if err != nil {
		return memory.Summary{}, err
	}
	return memory.Summary{Text: text, Method: memory.SummaryExtractive, Note: note}, nil
}

// candidates splits the messages into units and prices them. Each unit
// belongs to a line: one per message, or per speaker within an earlier
// summary being summarized again, so its attributions survive.
func (e *Extractive) candidates(f fitter, msgs []*memory.Message) ([]unit, []line, error) {
	var units []unit
	var lines []line
	for _, m := range msgs {
		if m == nil {
			continue
		}
		cur := -1
		add := func(sp, text string, feat features, extra float64) {
			if cur < 0 || lines[cur].speaker != sp {
				lines = append(lines, line{speaker: sp})
				cur = len(lines) - 1
			}
			units = append(units, unit{line: cur, text: text, feat: feat, score: extra})
		}
		sentences := func(sp, text string) {
			for _, s := range splitSentences(text) {
				feat := analyze(s)
				if feat.filler || isFence(s) {
					continue // "Thanks!" is not worth a token
				}
				add(sp, s, feat, 0)
			}
		}
		sp := speaker(m)
		switch {
		case m.Role == memory.RoleTool:
			toolUnits(m.Content, func(text string, feat features, extra float64) { add(sp, text, feat, extra) })
			if cur >= 0 {
				n := m.Tokens
				if n <= 0 {
					var err error
					if n, err = f.count(m.Content); err != nil {
						return nil, nil, err
					}
				}
				lines[cur].note = fmt.Sprintf("(tool output, %s)", plural(n, "token"))
			}
		case m.IsSummary():
			for _, l := range strings.Split(m.Content, "\n") {
				l = strings.TrimSpace(l)
				if strings.HasPrefix(l, "Summary of ") && strings.HasSuffix(l, ":") {
					continue // our own header
				}
				who, text, ok := strings.Cut(l, ": ")
				if !ok || who == "" || len(who) > 64 || strings.ContainsAny(who, " \t[") {
					who, text = sp, l
				}
				sentences(who, text)
			}
		default:
			sentences(sp, m.Content)
			for _, tc := range m.ToolCalls {
				t := toolCallText(tc, maxToolArgBytes)
				add(sp, t, analyze(t), 0)
			}
		}
	}
	for i := range lines {
		c, err := f.count(lines[i].speaker + ":")
		if err != nil {
			return nil, nil, err
		}
		lines[i].cost = c + 1 // and the newline before it
		if lines[i].note != "" {
			if c, err = f.count(" " + lines[i].note); err != nil {
				return nil, nil, err
			}
			lines[i].cost += c
		}
	}
	for i := range units {
		c, err := f.count(" " + units[i].text)
		if err != nil {
			return nil, nil, err
		}
		units[i].cost = c
	}
	return units, lines, nil
}

// toolUnits offers a tool output's first line and its error lines: the
// first line usually says what ran and how it went; the rest is data the
// agent can fetch again if it needs it.
func toolUnits(content string, add func(string, features, float64)) {
	n, errs := 0, 0
	for _, l := range strings.Split(content, "\n") {
		l = strings.TrimSpace(l)
		if !hasWordRune(l) {
			continue
		}
		if n == 0 {
			add(l, analyze(l), wToolFirst)
		} else if errs < maxToolErrorLines && isToolError(l) {
			add(l, analyze(l), 0)
			errs++
		}
		n++
	}
}

// isFence reports a markdown code fence line ("```go"): noise in a summary.
func isFence(s string) bool {
	return strings.HasPrefix(s, "```") && !strings.ContainsAny(strings.TrimPrefix(s, "```"), " \t")
}

// score sets every unit's score: centrality plus what it carries plus its
// share of the prompt's terms. It returns the units' vectors, for
// redundancy, and a note if the embedder failed.
func (e *Extractive) score(ctx context.Context, units []unit, prompt string) (*space, string, error) {
	texts := make([]string, len(units))
	for i, u := range units {
		texts[i] = u.text
	}
	var sp *space
	var note string
	if e.emb != nil {
		vecs, err := e.emb.Embed(ctx, texts)
		switch {
		case err == nil && len(vecs) == len(texts):
			sp = embedSpace(vecs)
		case ctx.Err() != nil:
			return nil, "", fmt.Errorf("summarize: %w", ctx.Err())
		default:
			if err == nil {
				err = fmt.Errorf("%d vectors for %d texts", len(vecs), len(texts))
			}
			note = fmt.Sprintf("embedder failed: %v; centrality from shared terms", err)
		}
	}
	if sp == nil {
		sp = termSpace(texts)
	}
	cent := sp.centrality()
	normalize(cent)

	pt := promptTerms(prompt)
	for i := range units {
		s := cent[i] + units[i].feat.score()
		if len(pt) > 0 {
			hits := 0
			for _, t := range uniq(terms(units[i].text)) {
				if pt[t] {
					hits++
				}
			}
			s += min(wPromptCap, wPromptTerm*float64(hits))
		}
		units[i].score += s
	}
	return sp, note, nil
}

func promptTerms(prompt string) map[string]bool {
	out := map[string]bool{}
	for _, t := range terms(prompt) {
		if len(out) >= maxPromptTerms {
			break
		}
		out[t] = true
	}
	return out
}

func uniq(ss []string) []string {
	slices.Sort(ss)
	return slices.Compact(ss)
}

// pick chooses units best first while their estimated cost fits, each
// round taking the unit with the best score less its redundancy with what
// is already chosen (so ten near-identical log lines do not crowd out the
// one line that differs). Then it checks the rendered text's exact count and
// drops the last picks until it fits: the estimate sums separately counted
// pieces, which can be off by a token where they join. If nothing fits it
// cuts the best unit.
func (e *Extractive) pick(f fitter, head string, units []unit, lines []line, order []int, sp *space, target int) (string, error) {
	hc, err := f.count(head)
	if err != nil {
		return "", err
	}
	budget := target - hc
	chosen := make([]bool, len(units))
	open := make([]int, len(lines)) // chosen units per line
	maxSim := make([]float64, len(units))
	seen := map[string]bool{}
	var picks []int
	used := 0
	alive := slices.Clone(order)
	for len(alive) > 0 {
		best, bestVal := -1, math.Inf(-1)
		keep := alive[:0]
		for _, i := range alive {
			u := units[i]
			if chosen[i] || u.cost > budget-used || seen[strings.ToLower(u.text)] {
				continue // for good: the budget only shrinks
			}
			keep = append(keep, i)
			c := u.cost
			if open[u.line] == 0 {
				c += lines[u.line].cost
			}
			if used+c > budget {
				continue // may fit later, once its line is open
			}
			// alive is in rank order: on a tie the earlier-ranked unit wins.
			if v := u.score - wRedundant*max(0, (maxSim[i]-simFloor)/(1-simFloor)); v > bestVal {
				best, bestVal = i, v
			}
		}
		alive = keep
		if best < 0 {
			break
		}
		u := units[best]
		used += u.cost
		if open[u.line] == 0 {
			used += lines[u.line].cost
		}
		open[u.line]++
		chosen[best], seen[strings.ToLower(u.text)] = true, true
		picks = append(picks, best)
		for _, i := range alive {
			if !chosen[i] {
				maxSim[i] = max(maxSim[i], sp.sim(best, i))
			}
		}
	}
	for len(picks) > 0 {
		text := render(head, units, lines, chosen)
		n, err := f.count(text)
		if err != nil {
			return "", err
		}
		if n <= target {
			return text, nil
		}
		last := picks[len(picks)-1]
		picks = picks[:len(picks)-1]
		chosen[last] = false
	}
	return e.cutBest(f, head, hc, units[order[0]], lines[units[order[0]].line], target)
}

// cutBest is the summary when no whole unit fits: the best unit cut at a
// word boundary, under the header if there is room for both.
func (e *Extractive) cutBest(f fitter, head string, hc int, u unit, l line, target int) (string, error) {
	body := l.speaker + ": " + u.text
	// The cut is counted alone and then under the header, where a token can
	// merge or split at the join: retry a little smaller a few times.
	for room, tries := target-hc-1, 0; room >= 4 && tries < 4; room, tries = room-1, tries+1 {
		cut, err := f.fit(body, room)
		if err != nil {
			return "", err
		}
		if cut == "" {
			break
		}
		text := head + "\n" + cut
		n, err := f.count(text)
		if err != nil {
			return "", err
		}
		if n <= target {
			return text, nil
		}
	}
	if cut, err := f.fit(body, target); err != nil || cut != "" {
		return cut, err
	}
	return f.fit(head, target)
}

// render writes the chosen units in their original order, grouped into
// their lines: "speaker: sentence sentence".
func render(head string, units []unit, lines []line, chosen []bool) string {
	var b strings.Builder
	b.WriteString(head)
	cur := -1
	for i, u := range units {
		if !chosen[i] {
			continue
		}
		if u.line != cur {
			if cur >= 0 && lines[cur].note != "" {
				b.WriteString(" " + lines[cur].note)
			}
			cur = u.line
			b.WriteString("\n" + lines[cur].speaker + ":")
		}
		b.WriteString(" " + u.text)
	}
	if cur >= 0 && lines[cur].note != "" {
		b.WriteString(" " + lines[cur].note)
	}
	return b.String()
}
