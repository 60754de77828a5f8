package main

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The agent replay's definitions of what a turn needs, character for
// character those of bench/agent_replay.py, so that `ctxd-bench eval --agent`
// and the script count the same names and the same lines.
//
// Go's regexp is RE2 and Python's re a backtracking engine, but for these
// patterns they find the same matches, with one difference handled below:
//   - Both are leftmost-first: at each position the alternative and the
//     repetition count a backtracking engine would pick (Go documents this),
//     so PATH's two alternatives and their greedy runs match alike.
//   - \b differs. Python's \b on str is Unicode (a word character is
//     str.isalnum() or _), Go's is ASCII. The classes around each \b are
//     ASCII, so a Go match is a Python match unless a non-ASCII letter or
//     digit touches it ("naïve_value": Python sees one word and no boundary
//     before "ve_value", Go sees a boundary). pyMatches drops those matches;
//     Python finds nothing else inside them (the characters up to the
//     letter are all in the pattern's classes, so every later start meets
//     the same missing boundary), and both scans resume after them.
//   - Go's \s is [\t\n\f\r ] and Python's is str.isspace(); norm and the
//     trimming below use pyIsSpace instead of any regexp.
//
// What is left: Go's unicode tables are Unicode 15.0, Python 3.11's 14.0,
// so a letter added in 15.0 (none below U+1123F) is a word character to
// pyIsWord only.
var (
	agentPathRE = regexp.MustCompile(`(?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.-]+` +
		`|[A-Za-z0-9_-]+\.(?:py|pyi|js|ts|go|rs|java|c|h|cpp|rst|txt|cfg|toml|ini|json|yaml|yml|md)\b`)
	agentIdentRE = regexp.MustCompile(`\b[A-Za-z_][A-Za-z0-9_]{5,}\b`)
)

// agentTail is how many of the newest messages count as recent: a name
// they hold is not needed from far back.
const agentTail = 6

// agentContextChars is how much of a long line around a name counts as
// showing the name in context.
const agentContextChars = 160

// pyIsSpace is Python's str.isspace(): Go's unicode.IsSpace plus the ASCII
// separators U+001C..U+001F, which Python counts as white space.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// pyIsWord is a word character of Python's re on str: str.isalnum() or _.
func pyIsWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) }

// pyIsLineBreak is a line boundary of Python's str.splitlines().
func pyIsLineBreak(r rune) bool {
	switch r {
	case '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// pyMatches is re.findall of a pattern whose \b (only) Go reads as ASCII:
// a match is dropped where a \b of the pattern sits next to a non-ASCII
// word character (see above). boundaryBefore says whether the match's
// start is a \b of the pattern; its end is one when endsAtB says so.
func pyMatches(re *regexp.Regexp, text string, boundaryBefore bool, endsAtB func(m string) bool) []string {
	var out []string
	for _, loc := range re.FindAllStringIndex(text, -1) {
		m := text[loc[0]:loc[1]]
		if boundaryBefore {
			if r, _ := utf8.DecodeLastRuneInString(text[:loc[0]]); r >= utf8.RuneSelf && pyIsWord(r) {
				continue
			}
		}
		if endsAtB(m) {
			if r, _ := utf8.DecodeRuneInString(text[loc[1]:]); r >= utf8.RuneSelf && pyIsWord(r) {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// agentSalient is the script's salient(): the paths of a text, and its
// identifiers of 6+ characters with an inner _ or a lower-to-upper step.
func agentSalient(text string) map[string]struct{} {
	out := map[string]struct{}{}
	// Only PATH's second alternative ends at \b, and only the first has a /.
	for _, p := range pyMatches(agentPathRE, text, false, func(m string) bool { return !strings.Contains(m, "/") }) {
		out[p] = struct{}{}
	}
	for _, w := range pyMatches(agentIdentRE, text, true, func(string) bool { return true }) {
		if strings.Contains(strings.Trim(w, "_"), "_") || hasCamelStep(w) {
			out[w] = struct{}{}
		}
	}
	return out
}

// hasCamelStep is re.search(r"[a-z][A-Z]", w).
func hasCamelStep(w string) bool {
	for i := 1; i < len(w); i++ {
		if w[i-1] >= 'a' && w[i-1] <= 'z' && w[i] >= 'A' && w[i] <= 'Z' {
			return true
		}
	}
	return false
}

// agentNorm is the script's norm(): each run of white space becomes one space.
func agentNorm(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if pyIsSpace(r) {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// agentContextLines is the script's context_lines(): the lines of text
// that hold token, trimmed, each cut to 160 characters (code points, as
// Python counts) around the token's first place, white space normalised.
func agentContextLines(text, token string) []string {
	var out []string
	// Empty lines cannot hold the token, so splitting at every break (and
	// dropping the empty pieces between \r and \n) keeps splitlines' lines.
	for _, line := range strings.FieldsFunc(text, pyIsLineBreak) {
		if !strings.Contains(line, token) {
			continue
		}
		line = strings.TrimFunc(line, pyIsSpace)
		if n := utf8.RuneCountInString(line); n > agentContextChars {
			k := utf8.RuneCountInString(line[:strings.Index(line, token)])
			lo := max(0, k-agentContextChars/2+utf8.RuneCountInString(token)/2)
			runes := []rune(line)
			line = string(runes[lo:min(n, lo+agentContextChars)])
		}
		out = append(out, agentNorm(line))
	}
	return out
}
