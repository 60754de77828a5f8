package ui

// Charts are SVG written here: numbers formatted by us, and every text
// (titles, labels) escaped, so a chart is as safe as a template.

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ctxd/ctxd/internal/numfmt"
	"github.com/ctxd/ctxd/memory"
)

var stateColor = map[string]string{
	memory.WindowOK: "#2f855a", memory.WindowFlushDue: "#b7791f",
	memory.WindowCompactionDue: "#c05621", memory.WindowOverLimit: "#c53030",
}

type svg struct{ b strings.Builder }

func (s *svg) f(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

// title writes a tooltip; text is escaped.
func (s *svg) title(text string) { s.f("<title>%s</title>", template.HTMLEscapeString(text)) }

func (s *svg) html() template.HTML { return template.HTML(s.b.String()) }

// gaugeSVG draws a session's window: how full it is, coloured by state,
// with the compaction trigger and the hard limit marked.
func gaugeSVG(st *memory.Status) template.HTML {
	const w, h = 160.0, 12.0
	fill := 0.0
	if st.ContextWindow > 0 {
		fill = min(float64(st.Tokens)/float64(st.ContextWindow), 1)
	}
	var s svg
	s.f(`<svg class="gauge" width="%g" height="%g" viewBox="0 0 %g %g" role="img">`, w, h+4, w, h+4)
	s.title(fmt.Sprintf("%s of %s tokens (%.1f%%), %s; compaction at %.0f%%, hard limit %.0f%%",
		numfmt.Thousands(st.Tokens), numfmt.Thousands(st.ContextWindow), st.PctUsed*100, st.State, st.Policy.TriggerPct*100, st.Policy.MaxPct*100))
	s.f(`<rect x="0" y="2" width="%g" height="%g" rx="2" fill="#e2e8f0"/>`, w, h)
	s.f(`<rect x="0" y="2" width="%.1f" height="%g" rx="2" fill="%s"/>`, fill*w, h, stateColor[st.State])
	for _, mark := range []struct {
		pct   float64
		color string
	}{{st.Policy.TriggerPct, "#4a5568"}, {st.Policy.MaxPct, "#c53030"}} {
		x := mark.pct * w
		s.f(`<line x1="%.1f" y1="0" x2="%.1f" y2="%g" stroke="%s" stroke-width="1.5"/>`, x, x, h+4, mark.color)
	}
	s.f(`</svg>`)
	return s.html()
}

// Plot areas.
const (
	chartW, chartH     = 920.0, 230.0
	padL, padR         = 60.0, 110.0
	padT, padB         = 12.0, 28.0
	maxPlotted         = 600 // points drawn at most: about one a pixel
	compactionColor    = "#6b46c1"
	triggerColor       = "#4a5568"
	hardLimitColor     = "#c53030"
	tokensLineColor    = "#2b6cb0"
	tokensAreaColor    = "#bee3f8"
	histogramCutoffCol = "#c53030"
	axisNameH          = 16.0 // the timeline's line under its axis, naming it
)

// timelineSVG draws the window's tokens write by write, each compaction a
// drop from before to after, with the trigger and hard limit. The x axis
// is the order of writes, not the clock: a burst of 300 turns in a minute
// after an idle day would otherwise be squeezed into a sliver, an idle gap
// drawn as a slope, and its compactions merged into one blob. The times of
// the first, middle and last write label the axis.
func timelineSVG(hist *memory.SessionHistory, st *memory.Status) template.HTML {
	pts := hist.Points
	if len(pts) == 0 {
		return ""
	}
	trigger := st.Policy.TriggerPct * float64(st.ContextWindow)
	hard := st.Policy.MaxPct * float64(st.ContextWindow)
	top := trigger
	for _, p := range pts {
		top = max(top, float64(p.Tokens))
	}
	top *= 1.08
	plotW, plotH := chartW-padL-padR, chartH-padT-padB
	x := func(i int) float64 {
		if len(pts) == 1 {
			return padL + plotW/2
		}
		return padL + float64(i)/float64(len(pts)-1)*plotW
	}
	// at is the index of the first point at or after t (points are in
	// time order; a compaction's before and after are points of their own).
	at := func(t time.Time) int {
		return min(sort.Search(len(pts), func(i int) bool { return !pts[i].At.Before(t) }), len(pts)-1)
	}
	y := func(v float64) float64 { return padT + plotH - v/top*plotH }

	var s svg
	s.f(`<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="window tokens over time">`, chartW, chartH+axisNameH)
	for i := 0; i <= 4; i++ {
		v := top / 4 * float64(i)
		s.f(`<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#edf2f7"/>`, padL, y(v), padL+plotW, y(v))
		s.f(`<text x="%g" y="%.1f" class="ax" text-anchor="end">%s</text>`, padL-6, y(v)+4, template.HTMLEscapeString(shortTokens(v)))
	}
	var line strings.Builder
	for _, i := range thin(pts, maxPlotted) {
		fmt.Fprintf(&line, "%.1f,%.1f ", x(i), y(float64(pts[i].Tokens)))
	}
	s.f(`<polygon points="%g,%.1f %s%.1f,%.1f" fill="%s" opacity="0.5"/>`, x(0), y(0), line.String(), x(len(pts)-1), y(0), tokensAreaColor)
	s.f(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, line.String(), tokensLineColor)
	limit := func(v float64, color, label string) {
		if v > top {
			return
		}
		s.f(`<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="%s" stroke-dasharray="5 4"/>`, padL, y(v), padL+plotW, y(v), color)
		s.f(`<text x="%g" y="%.1f" class="ax" fill="%s">%s</text>`, padL+plotW+6, y(v)+4, color, template.HTMLEscapeString(label))
	}
	limit(trigger, triggerColor, fmt.Sprintf("compaction %.0f%%", st.Policy.TriggerPct*100))
	limit(hard, hardLimitColor, fmt.Sprintf("hard limit %.0f%%", st.Policy.MaxPct*100))
	// Markers shrink as compactions crowd, so that each stays apart.
	r := 3.5
	if n := len(hist.Compactions); n > 0 {
		r = min(max(plotW/float64(n)/4, 1.5), 3.5)
	}
	for _, c := range hist.Compactions {
		xa, xb := x(at(c.StartedAt)), x(at(c.At))
		s.f(`<g class="cmp">`)
		s.title(fmt.Sprintf("compaction %s (%s): %s → %s tokens, freed %s; %d dropped, %d summarized, %d pruned",
			formatTime(c.At), c.Trigger, numfmt.Thousands(c.TokensBefore), numfmt.Thousands(c.TokensAfter), numfmt.Thousands(c.Freed()), c.Dropped, c.Summarized, c.Pruned))
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, xa, y(float64(c.TokensBefore)), xb, y(float64(c.TokensAfter)), compactionColor)
		s.f(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/>`, xa, y(float64(c.TokensBefore)), r, compactionColor)
		s.f(`<circle cx="%.1f" cy="%.1f" r="%.1f" fill="#fff" stroke="%s" stroke-width="1.5"/>`, xb, y(float64(c.TokensAfter)), r, compactionColor)
		s.f(`</g>`)
	}
	last := len(pts) - 1
	for k, i := range []int{0, last / 2, last} {
		anchor := [...]string{"start", "middle", "end"}[k]
		s.f(`<text x="%.1f" y="%g" class="ax" text-anchor="%s">%s</text>`, x(i), chartH-8, anchor,
			template.HTMLEscapeString(fmt.Sprintf("#%d · %s", i+1, formatTime(pts[i].At))))
	}
	s.f(`<text x="%.1f" y="%g" class="ax axis-name" text-anchor="middle">%s</text>`, padL+plotW/2, chartH+axisNameH-4,
		template.HTMLEscapeString(fmt.Sprintf("writes and compactions in order (%s points, not to time scale)", numfmt.Thousands(len(pts)))))
	s.f(`</svg>`)
	return s.html()
}

// thin keeps at most about n points of a series, as indexes into it: per
// bucket of consecutive points its lowest and highest, so peaks and
// troughs survive.
func thin(pts []memory.TokenPoint, n int) []int {
	out := make([]int, 0, min(len(pts), n+2))
	if len(pts) <= n {
		for i := range pts {
			out = append(out, i)
		}
		return out
	}
	per := int(math.Ceil(float64(len(pts)) / float64(n/2)))
	for i := 0; i < len(pts); i += per {
		lo, hi := i, i
		for j := i; j < min(i+per, len(pts)); j++ {
			if pts[j].Tokens < pts[lo].Tokens {
				lo = j
			}
			if pts[j].Tokens > pts[hi].Tokens {
				hi = j
			}
		}
		out = append(out, min(lo, hi))
		if lo != hi {
			out = append(out, max(lo, hi))
		}
	}
	return out
}

func shortTokens(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// Drop reasons in the order their bars stack, with their colours.
var reasonColors = []struct{ reason, color string }{
	{memory.ReasonLowRelevance, "#c05621"}, {memory.ReasonBudget, "#2b6cb0"},
	{memory.ReasonSummarized, "#6b46c1"}, {memory.ReasonSummaryRolled, "#b794f4"},
}

// histogramSVG draws drop scores in bins, stacked by reason, with the
// relevance cutoff: drops right of it were dropped for room, not for
// being irrelevant.
func histogramSVG(d memory.DropStats) template.HTML {
	if d.Count == 0 {
		return ""
	}
	peak := 1
	for _, bin := range d.Bins {
		n := 0
		for _, c := range bin {
			n += c
		}
		peak = max(peak, n)
	}
	plotW, plotH := chartW-padL-padR, chartH-padT-padB
	bw := plotW / memory.DropBins
	y := func(v float64) float64 { return padT + plotH - v/float64(peak)*plotH }
	var s svg
	s.f(`<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="drop scores">`, chartW, chartH)
	for i := 0; i <= 4; i++ {
		v := float64(peak) / 4 * float64(i)
		s.f(`<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#edf2f7"/>`, padL, y(v), padL+plotW, y(v))
		s.f(`<text x="%g" y="%.1f" class="ax" text-anchor="end">%.0f</text>`, padL-6, y(v)+4, v)
	}
	for i, bin := range d.Bins {
		base := 0
		x := padL + float64(i)*bw
		for _, rc := range stackOrder(bin) {
			n := bin[rc.reason]
			if n == 0 {
				continue
			}
			s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">`, x+1, y(float64(base+n)), bw-2, y(float64(base))-y(float64(base+n)), rc.color)
			s.title(fmt.Sprintf("%d %s, score %.2f–%.2f", n, rc.reason, float64(i)/memory.DropBins, float64(i+1)/memory.DropBins))
			s.f(`</rect>`)
			base += n
		}
	}
	for i := 0; i <= 10; i += 2 {
		s.f(`<text x="%.1f" y="%g" class="ax" text-anchor="middle">%.1f</text>`, padL+float64(i)/10*plotW, chartH-8, float64(i)/10)
	}
	cx := padL + min(max(d.Cutoff, 0), 1)*plotW
	s.f(`<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="%s" stroke-width="2" stroke-dasharray="5 3"/>`, cx, padT, cx, padT+plotH, histogramCutoffCol)
	s.f(`<text x="%.1f" y="%g" class="ax" fill="%s">cutoff %.2f</text>`, cx+4, padT+10, histogramCutoffCol, d.Cutoff)
	s.f(`</svg>`)
	return s.html()
}

// stackOrder is the known reasons in their order, then any others grey,
// by name (a map's order would reshuffle the bars on every load).
func stackOrder(bin map[string]int) []struct{ reason, color string } {
	out := append([]struct{ reason, color string }{}, reasonColors...)
	var other []string
	for reason := range bin {
		if !slices.ContainsFunc(reasonColors, func(rc struct{ reason, color string }) bool { return rc.reason == reason }) {
			other = append(other, reason)
		}
	}
	slices.Sort(other)
	for _, reason := range other {
		out = append(out, struct{ reason, color string }{reason, "#a0aec0"})
	}
	return out
}
