package memory

import (
	"strings"
	"unicode/utf8"
)

// The prompt of a context call or a compaction is the agent's newest
// input, and a coding agent's newest input is often a whole tool output of
// tens of kilobytes. It is accepted whole, up to the size of a message
// (Limits.MaxContentBytes), and counted whole: the window must leave room
// for all of it. What ranks messages against it (the index search, the
// embedding, the recall terms, the scorer) is a bounded part of it, its
// head and its tail: a tool output names its command and files at the top
// and ends with the error or the result, and the middle of a long log
// rarely says what the next step is about. Bounding it keeps a context
// call's cost independent of the size of its input.
const promptPartBytes = 8 << 10

// checkPrompt refuses a prompt no message could hold.
func checkPrompt(p string, lim Limits) error {
	if len(p) > lim.MaxContentBytes {
		return Errorf(ETOOLARGE, "prompt: %d bytes is over the limit of %d (the largest message)", len(p), lim.MaxContentBytes)
	}
	if err := checkText(p); err != nil {
		return Errorf(EINVALID, "prompt: %v", err)
	}
	return nil
}

// queryPart is the part of a prompt that ranks messages: all of it when
// short, else its first and last promptPartBytes, cut at rune boundaries.
func queryPart(p string) string {
	if len(p) <= 2*promptPartBytes {
		return p
	}
	head, tail := promptPartBytes, len(p)-promptPartBytes
	for head > 0 && !utf8.RuneStart(p[head]) {
		head--
	}
	for tail < len(p) && !utf8.RuneStart(p[tail]) {
		tail++
	}
	return strings.Join([]string{p[:head], p[tail:]}, "\n")
}
