package main

import (
	"slices"
	"strings"
)

// agentNeeds follows one run as the script's replay() does to find what
// each assistant turn needs from far back: the names of the system prompt
// and the task (known: pinned or protected anyway), where each name first
// appeared (first_seen), and each message's names, found once.
type agentNeeds struct {
	msgs      []agentMessage
	firstAsst int
	salient   []map[string]struct{}
	known     map[string]struct{}
	firstSeen map[string]int
}

// newAgentNeeds starts on msgs with the messages before the first
// assistant turn seen.
func newAgentNeeds(msgs []agentMessage, firstAsst int) *agentNeeds {
	a := &agentNeeds{msgs: msgs, firstAsst: firstAsst, salient: make([]map[string]struct{}, len(msgs)),
		known: map[string]struct{}{}, firstSeen: map[string]int{}}
	for i := range firstAsst {
		for t := range a.of(i) {
			a.known[t] = struct{}{}
		}
	}
	a.note(0, firstAsst)
	return a
}

// of is message i's names.
func (a *agentNeeds) of(i int) map[string]struct{} {
	if a.salient[i] == nil {
		a.salient[i] = agentSalient(a.msgs[i].text())
	}
	return a.salient[i]
}

// note records where the names of messages lo..hi-1 first appeared.
func (a *agentNeeds) note(lo, hi int) {
	for j := lo; j < hi; j++ {
		for t := range a.of(j) {
			if _, ok := a.firstSeen[t]; !ok {
				a.firstSeen[t] = j
			}
		}
	}
}

// at is what turn i needs: its names that neither the system prompt, the
// task nor the last agentTail messages hold and that first appeared in a
// tool output further back.
func (a *agentNeeds) at(i int) []string {
	recent := map[string]struct{}{}
	for j := max(0, i-agentTail); j < i; j++ {
		for t := range a.of(j) {
			recent[t] = struct{}{}
		}
	}
	var need []string
	for t := range a.of(i) {
		_, isKnown := a.known[t]
		_, isRecent := recent[t]
		first, seen := a.firstSeen[t]
		if !isKnown && !isRecent && seen && first < i-agentTail && a.msgs[first].Role == "tool" {
			need = append(need, t)
		}
	}
	return need
}

// count adds turn i's needs to acc: each is shown in context by the
// window (shown, its texts), the baseline (base) or compact-at-limit
// (compact) when one of the lines of an earlier tool output holding it
// appears there verbatim.
func (a *agentNeeds) count(i int, need, shown, base, compact []string, acc *agentAcc) {
	if len(need) == 0 {
		return
	}
	shownText := agentNorm(strings.Join(shown, "\n"))
	baseText := agentNorm(strings.Join(base, "\n"))
	compactText := agentNorm(strings.Join(compact, "\n"))
	for _, t := range need {
		var lines []string
		for j := a.firstAsst; j < i; j++ {
			if a.msgs[j].Role == "tool" && strings.Contains(a.msgs[j].Content, t) {
				lines = append(lines, agentContextLines(a.msgs[j].Content, t)...)
			}
		}
		acc.Needed++
		if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(shownText, l) }) {
			acc.NeededCtxd++
		}
		if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(baseText, l) }) {
			acc.NeededBase++
		}
		if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(compactText, l) }) {
			acc.NeededCompact++
		}
	}
}
