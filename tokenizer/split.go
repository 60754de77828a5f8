package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// tiktoken splits text into pieces with a regular expression before merging
// bytes; tiktoken-go runs it with regexp2, a backtracking engine that took
// about 85% of a 60-word count and 27% of the server's CPU while ingesting.
// The functions here find the same pieces in one pass over valid UTF-8
// text. They follow the patterns in specs (encodings.go) alternative by
// alternative, with regexp2's semantics: the first alternative that matches
// wins (not the longest), quantifiers are greedy and give back characters
// when what follows fails. Classes are tested with the unicode package's
// tables, as regexp2 does (\s is unicode.IsSpace, (?i) compares
// unicode.ToLower). FuzzSplit and TestSplitMatchesRegexp check every piece
// against regexp2.

// splitter returns the end (a byte offset) of the piece that starts at i.
type splitter func(s string, i int) int

var splitters = map[string]splitter{
	"o200k_base":  splitO200k,
	"cl100k_base": splitCl100k,
}

// splitO200k follows
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitO200k(s string, i int) int {
	starts, n := prefixed(s, i)
	for _, start := range starts[:n] {
		if end, ok := upperThenLower(s, start); ok {
			return contraction(s, end)
		}
	}
	for _, start := range starts[:n] {
		if end := run(s, start, isUpperish); end > start {
			return contraction(s, run(s, end, isLowerish))
		}
	}
	if end, ok := digits(s, i); ok {
		return end
	}
	if end, ok := punctuation(s, i, isCRLFOrSlash); ok {
		return end
	}
	return spaces(s, i)
}

// splitCl100k follows
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCl100k(s string, i int) int {
	if end := contraction(s, i); end > i {
		return end
	}
	starts, n := prefixed(s, i)
	for _, start := range starts[:n] {
		if end := run(s, start, isLetter); end > start {
			return end
		}
	}
	if end, ok := digits(s, i); ok {
		return end
	}
	if end, ok := punctuation(s, i, isCRLF); ok {
		return end
	}
	return spaces(s, i)
}

// prefixed lists where the rest of a letter alternative may start, in the
// order backtracking tries them: after the optional [^\r\n\p{L}\p{N}] at i
// when it matches, then at i itself. An array: a slice would be allocated
// for every piece.
func prefixed(s string, i int) (starts [2]int, n int) {
	if r, size := decode(s, i); size > 0 && r != '\r' && r != '\n' && !isLetter(r) && !isNumber(r) {
		return [2]int{i + size, i}, 2
	}
	return [2]int{i}, 1
}

// upperThenLower matches [A]*[B]+ at i (A: Lu Lt Lm Lo M, B: Ll Lm Lo M).
// The greedy [A]* gives back characters until [B]+ can start: [B]+ starts
// at the last position within the A-run (or just after it) that holds a B
// character, and runs as far as B characters go.
func upperThenLower(s string, i int) (int, bool) {
	lastB := -1
	j := i
	for j < len(s) {
		r, n := decode(s, j)
		if !isUpperish(r) {
			if isLowerish(r) {
				lastB = j
			}
			break
		}
		if isLowerish(r) {
			lastB = j
		}
		j += n
	}
	if lastB < 0 {
		return 0, false
	}
	return run(s, lastB, isLowerish), true
}

// digits matches \p{N}{1,3}.
func digits(s string, i int) (int, bool) {
	j := i
	for k := 0; k < 3 && j < len(s); k++ {
		r, n := decode(s, j)
		if !isNumber(r) {
			break
		}
		j += n
	}
	return j, j > i
}

// punctuation matches ` ?[^\s\p{L}\p{N}]+` followed by a run of trailing
// characters (o200k: [\r\n/]*, cl100k: [\r\n]*).
func punctuation(s string, i int, trailing func(rune) bool) (int, bool) {
	start := i
	if start < len(s) && s[start] == ' ' {
		start++
	}
	end := run(s, start, isSymbol)
	if end == start {
		return 0, false // without the space, [^\s...]+ cannot start at a space
	}
	return run(s, end, trailing), true
}

// spaces matches \s*[\r\n]+|\s+(?!\S)|\s+ at i, where the text is a space:
// every other character starts a letter, digit or punctuation piece.
//   - \s*[\r\n]+ gives back spaces until the last \r or \n of the run, and
//     ends just after it.
//   - \s+(?!\S) takes the whole run at the end of the text, else all of it
//     but the last character, when that leaves one.
//   - \s+ takes the one space left.
func spaces(s string, i int) int {
	end := run(s, i, unicode.IsSpace)
	lastNL := -1
	for j := i; j < end; {
		r, n := decode(s, j)
		if r == '\r' || r == '\n' {
			lastNL = j + n
		}
		j += n
	}
	if lastNL >= 0 {
		return lastNL
	}
	if end == len(s) {
		return end
	}
	if _, n := decodeLast(s[i:end]); end-n > i {
		return end - n
	}
	return end
}

// contraction extends a piece ending at i by (?i:'s|'t|'re|'ve|'m|'ll|'d).
func contraction(s string, i int) int {
	if i >= len(s) || s[i] != '\'' {
		return i
	}
	r1, n1 := decode(s, i+1)
	if n1 == 0 {
		return i
	}
	switch unicode.ToLower(r1) {
	case 's', 't', 'm', 'd':
		return i + 1 + n1
	case 'r', 'v':
		if r2, n2 := decode(s, i+1+n1); n2 > 0 && unicode.ToLower(r2) == 'e' {
			return i + 1 + n1 + n2
		}
	case 'l':
		if r2, n2 := decode(s, i+1+n1); n2 > 0 && unicode.ToLower(r2) == 'l' {
			return i + 1 + n1 + n2
		}
	}
	return i
}

// run returns the end of the run of characters in class starting at i.
func run(s string, i int, class func(rune) bool) int {
	for i < len(s) {
		r, n := decode(s, i)
		if !class(r) {
			break
		}
		i += n
	}
	return i
}

// decode returns the rune at i and its size; size 0 at the end of s.
func decode(s string, i int) (rune, int) {
	if i >= len(s) {
		return 0, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

func decodeLast(s string) (rune, int) {
	if c := s[len(s)-1]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeLastRuneInString(s)
}

// The classes. ASCII is decided inline: it is nearly all of the text.

func isLetter(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	}
	return unicode.IsLetter(r)
}

func isNumber(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.IsNumber(r)
}

// isUpperish is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}].
func isUpperish(r rune) bool {
	if r < utf8.RuneSelf {
		return 'A' <= r && r <= 'Z'
	}
	return unicode.IsUpper(r) || unicode.IsTitle(r) || unicode.In(r, unicode.Lm, unicode.Lo, unicode.M)
}

// isLowerish is [\p{Ll}\p{Lm}\p{Lo}\p{M}].
func isLowerish(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z'
	}
	return unicode.IsLower(r) || unicode.In(r, unicode.Lm, unicode.Lo, unicode.M)
}

// isSymbol is [^\s\p{L}\p{N}].
func isSymbol(r rune) bool {
	return !unicode.IsSpace(r) && !isLetter(r) && !isNumber(r)
}

func isCRLF(r rune) bool        { return r == '\r' || r == '\n' }
func isCRLFOrSlash(r rune) bool { return r == '\r' || r == '\n' || r == '/' }
