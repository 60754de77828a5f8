package summarize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// abbreviations end with a dot that does not end a sentence, whatever follows.
// "etc" is left out on purpose: it ends sentences as often as not, so it is
// handled like any word (split before a capital).
var abbreviations = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "sr": true, "jr": true,
	"st": true, "vs": true, "e.g": true, "i.e": true, "cf": true, "fig": true, "no": true,
	"approx": true, "inc": true, "ltd": true, "co": true, "corp": true, "dept": true,
	"est": true, "min": true, "max": true, "ca": true, "al": true, "resp": true, "viz": true,
	"jan": true, "feb": true, "mar": true, "apr": true, "jun": true, "jul": true, "aug": true,
	"sep": true, "sept": true, "oct": true, "nov": true, "dec": true,
	"a.m": true, "p.m": true, "u.s": true, "u.k": true, "ph.d": true, "op": true, "ref": true,
}

// closers may follow a terminator and still belong to its sentence.
const closers = "\"')]}»”’"

// splitSentences splits text into sentences, trimmed, dropping empty ones.
// A line break always ends a sentence: chat text breaks lines for lists,
// code and log output, rarely to wrap prose. Within a line a sentence ends at
// '.', '!', '?' or '…' (with any closing quotes or brackets) followed by white
// space, so dots inside tokens (1.2.3, main.go, https://x.io/a.b, e.g.,)
// never split; or at an ideographic '。', '！', '？', which need no space.
func splitSentences(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		out = splitLine(line, out)
	}
	return out
}

func splitLine(line string, out []string) []string {
	start := 0
	emit := func(end int) {
		if s := strings.TrimSpace(line[start:end]); hasWordRune(s) {
			out = append(out, s)
		}
		start = end
	}
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRuneInString(line[i:])
		switch r {
		case '。', '！', '？':
			emit(skipClosers(line, i+size))
			i = start
			continue
		case '.', '!', '?', '…':
			end := skipClosers(line, skipTerminators(line, i))
			if endsSentence(line, start, i, end) {
				emit(end)
				i = start
				continue
			}
			i = end
			continue
		}
		i += size
	}
	emit(len(line))
	return out
}

func skipTerminators(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != '.' && r != '!' && r != '?' && r != '…' {
			break
		}
		i += size
	}
	return i
}

func skipClosers(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !strings.ContainsRune(closers, r) {
			break
		}
		i += size
	}
	return i
}

// endsSentence decides whether the terminator run line[at:end] ends the
// sentence that began at start.
func endsSentence(line string, start, at, end int) bool {
	if end >= len(line) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(line[end:])
	if !unicode.IsSpace(r) {
		return false // a dot inside a token: version, path, URL, "e.g.,"
	}
	if line[at] != '.' || strings.HasPrefix(line[at:], "...") || strings.HasPrefix(line[at:], "…") {
		return true // '!', '?' and ellipses end a sentence before any space
	}
	word := lastWord(line[start:at])
	lw := strings.ToLower(strings.TrimLeft(word, "(\"'[{"))
	switch {
	case abbreviations[lw]:
		return false
	case isInitial(word):
		return false // "J. Smith"
	case isAllDigits(word) && strings.TrimSpace(line[start:at]) == word:
		return false // a list marker: "1. First do this"
	}
	next := nextRune(line[end:])
	if unicode.IsLower(next) {
		// "ok. let's go" is probably one thought typed in lower case; "the
		// tests pass. then deploy" is two. A long plain word before the dot
		// says sentence; a short or odd one (an abbreviation we do not know)
		// says not.
		return utf8.RuneCountInString(word) >= 4 && isLetters(word)
	}
	return true
}

// lastWord returns the text after the last space of s.
func lastWord(s string) string {
	if i := strings.LastIndexFunc(s, unicode.IsSpace); i >= 0 {
		_, size := utf8.DecodeRuneInString(s[i:])
		return s[i+size:]
	}
	return s
}

// nextRune returns the first non-space rune of s, or 0.
func nextRune(s string) rune {
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return r
		}
	}
	return 0
}

func isInitial(w string) bool {
	r, size := utf8.DecodeRuneInString(w)
	return size == len(w) && unicode.IsUpper(r)
}

func isAllDigits(w string) bool {
	if w == "" {
		return false
	}
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func isLetters(w string) bool {
	for _, r := range w {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return w != ""
}

func hasWordRune(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return true
		}
	}
	return false
}
