package summarize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// What a sentence carries, beyond how central it is. The weights are on the
// scale of centrality (0..1): one strong signal (a decision, an identifier,
// an error) outweighs the difference between a central and a peripheral
// sentence, because a summary that loses "we decided X" or "PROJ-123" is
// wrong, while one that loses a typical sentence is only shorter.
const (
	wIdent      = 0.7
	wIdentExtra = 0.1 // per further identifier, up to wIdentCap in all
	wIdentCap   = 1.0
	wPath       = 0.7
	wURL        = 0.7
	wNumber     = 0.3
	wDate       = 0.3
	wName       = 0.2
	wDecision   = 0.9
	wError      = 0.7
	wTodo       = 0.6
	wQuestion   = 0.5
	wConstraint = 0.6
	wPromptTerm = 0.2 // per distinct prompt term, up to wPromptCap
	wPromptCap  = 0.6
	wShort      = -0.3 // fewer than four words and nothing else to show
	wToolFirst  = 0.3  // a tool's first line says what the output was (see toolUnits)
)

// Phrases are matched on lower-cased text at word boundaries. Plain string
// search instead of regular expressions: a big case-insensitive alternation
// cost ~100 us per sentence, most of the summarizer's time.
var (
	decisionPhrases = []string{"decided", "decide", "decision", "we will", "we'll", "agreed", "agree", "let's", "let us",
		"going with", "go with", "chose", "settled on", "the plan is", "approved", "opted"}
	errorPhrases = []string{"error", "errors", "errored", "failed", "fails", "failing", "failure", "exception", "panic",
		"panicked", "traceback", "fatal", "crash", "crashed", "segfault", "timed out", "timeout", "refused", "denied"}
	todoPhrases = []string{"todo", "fixme", "need to", "needs to", "must", "should", "next step", "next steps",
		"follow up", "follow-up", "action item", "remaining", "still have to"}
	constraintPhrases = []string{"must not", "mustn't", "never", "always", "only", "do not", "don't", "cannot", "can't",
		"at most", "at least", "no more than", "required", "forbidden", "not allowed"}
	datePhrases = []string{"today", "tomorrow", "yesterday", "tonight", "monday", "tuesday", "wednesday", "thursday",
		"friday", "saturday", "sunday", "eod", "eow", "next week", "last week"}
	// toolErrorPhrases find error lines in tool output, which is often code:
	// "error" alone would take every Go function signature.
	toolErrorPhrases = []string{"error:", "exception:", "fatal:", "panic:", "traceback", "failed", "fail", "exit status",
		"exit code", "permission denied", "no such file", "not found", "timed out", "refused"}
)

var months = map[string]bool{
	"jan": true, "january": true, "feb": true, "february": true, "mar": true, "march": true, "apr": true, "april": true,
	"may": true, "jun": true, "june": true, "jul": true, "july": true, "aug": true, "august": true, "sep": true,
	"sept": true, "september": true, "oct": true, "october": true, "nov": true, "november": true, "dec": true, "december": true,
}

// fileExts are extensions that make "name.ext" a file name.
var fileExts = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`go py js mjs ts tsx jsx rs java kt c h cc cpp hpp cs rb php swift md rst txt json
		yaml yml toml ini cfg conf env sh bash sql html css proto lock mod sum log csv xml ipynb gradle tf`) {
		fileExts[e] = true
	}
}

// fillerWords make up sentences that carry nothing ("Okay, sounds good!").
var fillerWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`ok okay alright thanks thank thx you so much sure great cool nice good perfect
		awesome got it sounds makes sense of course no problem yes yep yeah nope right hmm hi hello hey there will
		do that works let me know glad to help happy`) {
		fillerWords[w] = true
	}
}

// features is what a sentence carries.
type features struct {
	idents                          int
	path, url, number, date, name   bool
	decision, error, todo, question bool
	constraint, filler, short       bool
}

// analyze finds what s carries.
func analyze(s string) features {
	var f features
	lower := strings.ToLower(s)
	words := strings.Fields(s)
	f.decision = hasPhrase(lower, decisionPhrases)
	f.error = hasPhrase(lower, errorPhrases) || isStackLine(s)
	f.todo = hasPhrase(lower, todoPhrases)
	f.constraint = hasPhrase(lower, constraintPhrases)
	f.date = hasPhrase(lower, datePhrases)
	f.question = strings.HasSuffix(strings.TrimRight(s, closers), "?") || strings.Contains(s, "? ")
	f.short = len(words) < 4
	f.filler = len(words) <= 8
	prevMonth := false
	for i, w := range words {
		t := strings.Trim(w, `"'()[]{},;:!?<>*`)
		t = strings.TrimRight(t, ".")
		kind := classify(t)
		switch {
		case kind&kURL != 0:
			f.url = true
		case kind&kPath != 0:
			f.path = true
		case kind&kIdent != 0:
			f.idents++
		}
		if kind&kNumber != 0 {
			f.number = true
			if prevMonth {
				f.date = true
			}
		}
		if kind&kDate != 0 {
			f.date = true
		}
		prevMonth = months[strings.ToLower(t)]
		if i > 0 && !f.name && isName(t, words[i-1]) {
			f.name = true
		}
		if f.filler {
			for _, p := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return !unicode.IsLetter(r) }) {
				if !fillerWords[p] {
					f.filler = false
				}
			}
		}
	}
	f.filler = f.filler && hasWordRune(s)
	return f
}

// score is the features' weight.
func (f features) score() float64 {
	var v float64
	if f.idents > 0 {
		v += min(wIdentCap, wIdent+wIdentExtra*float64(f.idents-1))
	}
	for _, c := range []struct {
		on bool
		w  float64
	}{
		{f.path, wPath}, {f.url, wURL}, {f.number, wNumber}, {f.date, wDate}, {f.name, wName},
		{f.decision, wDecision}, {f.error, wError}, {f.todo, wTodo}, {f.question, wQuestion},
		{f.constraint, wConstraint},
	} {
		if c.on {
			v += c.w
		}
	}
	if f.short && v <= 0 {
		v += wShort
	}
	return v
}

// hasPhrase reports whether lower holds one of phrases with a word boundary
// on both sides.
func hasPhrase(lower string, phrases []string) bool {
	for _, p := range phrases {
		for from := 0; ; {
			i := strings.Index(lower[from:], p)
			if i < 0 {
				break
			}
			i += from
			end := i + len(p)
			if (i == 0 || !isWordByte(lower[i-1])) && (end == len(lower) || !isWordByte(lower[end]) || !isWordByte(p[len(p)-1])) {
				return true
			}
			from = i + 1
		}
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}

// Token kinds.
const (
	kIdent = 1 << iota
	kPath
	kURL
	kNumber
	kDate
)

// classify says what one whitespace-separated token (punctuation trimmed)
// is. Hand-written checks rather than regular expressions: they run for
// every word of every message.
func classify(t string) int {
	if t == "" {
		return 0
	}
	var upper, lower, digit, letter, under, slash, dot, other int
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c >= 'A' && c <= 'Z':
			upper++
			letter++
		case c >= 'a' && c <= 'z':
			lower++
			letter++
		case c >= '0' && c <= '9':
			digit++
		case c == '_':
			under++
		case c == '/' || c == '\\':
			slash++
		case c == '.':
			dot++
		default:
			other++
		}
	}
	k := 0
	if digit > 0 {
		k |= kNumber
	}
	lt := strings.ToLower(t)
	switch {
	case strings.HasPrefix(lt, "http://") || strings.HasPrefix(lt, "https://") || strings.HasPrefix(lt, "ftp://") ||
		strings.HasPrefix(lt, "ws://") || strings.HasPrefix(lt, "wss://") || strings.HasPrefix(lt, "www.") && dot >= 2:
		return k | kURL
	case t[0] == '`' || strings.HasSuffix(t, "`"):
		k |= kIdent
	}
	if isDateToken(t) {
		return k | kDate
	}
	if slash > 0 && letter > 0 && isPath(t, slash) {
		return k | kPath
	}
	if dot > 0 && letter > 0 {
		if i := strings.LastIndexByte(t, '.'); i > 0 && i < len(t)-1 && fileExts[strings.ToLower(t[i+1:])] && isNameChars(t[:i]) {
			return k | kPath
		}
	}
	switch {
	case isUUID(t), isHex(t) && len(t) >= 7 && digit > 0 && letter > 0, isTicket(t):
		k |= kIdent
	case under > 0 && letter > 0 && !strings.HasPrefix(t, "_") && !strings.HasSuffix(t, "_"):
		k |= kIdent // snake_case, CONSTANT_CASE
	case letter > 0 && lower > 0 && upper > 0 && other == 0 && slash == 0 && hasInnerUpper(t):
		k |= kIdent // camelCase, PascalCase, memory.Summarizer
	case strings.Contains(t, "(") && isNameChars(t[:strings.IndexByte(t, '(')]) && strings.IndexByte(t, '(') > 0:
		k |= kIdent // call(), pkg.Func(x)
	}
	return k
}

// isPath reports a file path: absolute, ./ ~/ relative, a/b/c, or dir/f.ext.
// "and/or" and dates like 1/2/2026 are not.
func isPath(t string, slashes int) bool {
	if len(t) > 2 && (t[1] == ':' && t[2] == '\\') {
		return true // C:\dir
	}
	for _, p := range []string{"/", "./", "../", "~/"} {
		if strings.HasPrefix(t, p) && len(t) > len(p) {
			return true
		}
	}
	if slashes >= 2 {
		return true
	}
	last := t[strings.LastIndexAny(t, `/\`)+1:]
	i := strings.LastIndexByte(last, '.')
	return i > 0 && i < len(last)-1
}

func isNameChars(s string) bool {
	for _, r := range s {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return s != ""
}

func hasInnerUpper(t string) bool {
	for i := 1; i < len(t); i++ {
		if t[i] >= 'A' && t[i] <= 'Z' && t[i-1] != '.' && !(t[i-1] >= 'A' && t[i-1] <= 'Z') {
			return true
		}
		if t[i] >= 'A' && t[i] <= 'Z' && t[i-1] == '.' && i > 1 {
			return true // pkg.Type
		}
	}
	return false
}

func isHex(t string) bool {
	for i := 0; i < len(t); i++ {
		if c := t[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func isUUID(t string) bool {
	if len(t) != 36 || t[8] != '-' || t[13] != '-' || t[18] != '-' || t[23] != '-' {
		return false
	}
	return isHex(strings.ToLower(strings.ReplaceAll(t, "-", "")))
}

// isTicket reports an issue key like PROJ-123.
func isTicket(t string) bool {
	i := strings.IndexByte(t, '-')
	if i < 2 || i > 10 || i == len(t)-1 || t[0] < 'A' || t[0] > 'Z' {
		return false
	}
	for j := 1; j < i; j++ {
		if c := t[j]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return isAllDigits(t[i+1:])
}

// isDateToken reports 2026-01-15, 15/01/2026 or 10:30.
func isDateToken(t string) bool {
	shape := []byte(t)
	for i, c := range shape {
		if c >= '0' && c <= '9' {
			shape[i] = '9'
		}
	}
	switch string(shape) {
	case "9999-99-99", "99:99", "9:99", "99:99:99", "99/99/9999", "9/9/9999", "99/9/9999", "9/99/9999", "99/99/99", "9999/99/99":
		return true
	}
	return strings.HasPrefix(string(shape), "9999-99-99T")
}

// isStackLine reports a line that looks like a stack frame or a compiler
// or test failure position.
func isStackLine(s string) bool {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "at ") && strings.Contains(t, "(") || strings.HasPrefix(t, `File "`) && strings.Contains(t, ", line ") ||
		strings.HasPrefix(t, "goroutine ") || strings.HasPrefix(t, "Caused by") || strings.HasPrefix(t, "Traceback") {
		return true
	}
	// file.go:42 anywhere: a position in source
	for _, w := range strings.Fields(t) {
		i := strings.IndexByte(w, ':')
		if i > 0 && i < len(w)-1 && w[i+1] >= '0' && w[i+1] <= '9' {
			if d := strings.LastIndexByte(w[:i], '.'); d > 0 && fileExts[strings.ToLower(w[d+1:i])] {
				return true
			}
		}
	}
	return false
}

// isToolError reports an error line of tool output.
func isToolError(line string) bool {
	return hasPhrase(strings.ToLower(line), toolErrorPhrases) || isStackLine(line)
}

// notNames are capitalised words that name nobody even mid-sentence.
var notNames = map[string]bool{"I": true, "I'm": true, "I've": true, "I'll": true, "I'd": true, "OK": true, "Ok": true}

// isName reports a capitalised word that does not start a sentence or a
// clause after ':', the cheap sign of a person, product or place.
func isName(w, prev string) bool {
	if strings.HasSuffix(prev, ":") || strings.HasSuffix(prev, ".") {
		return false
	}
	r, size := utf8.DecodeRuneInString(w)
	if size == 0 || !unicode.IsUpper(r) || notNames[w] {
		return false
	}
	rest := w[size:]
	// "A", "JSON", "X2": acronyms and labels, not names.
	return rest != "" && isLetters(rest) && strings.ToUpper(rest) != rest
}

// stopwords are left out of term vectors and prompt terms: they say nothing
// about what a sentence is about.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be
		because been before being below between both but by can could did do does doing down during each
		few for from further had has have having he her here hers him his how i if in into is it its itself
		just me more most my no nor not now of off on once or other our ours out over own same she so some
		such than that the their them then there these they this those through to too under until up very
		was we were what when where which while who whom why will with would you your yours also get got let
		lets like make one ok okay please thanks yes yeah sure well us i'm it's that's don't we'll i'll`) {
		m[w] = true
	}
	return m
}()

// terms returns the lower-cased content words of s, in order, with repeats.
// Identifier characters (_ . / -) stay inside a term so "memory.Summarizer"
// and "PROJ-123" are one term each.
func terms(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '.' || r == '/' || r == '\'')
	}) {
		f = strings.ToLower(strings.Trim(f, "-./'"))
		if utf8.RuneCountInString(f) < 2 || stopwords[f] {
			continue
		}
		out = append(out, f)
	}
	return out
}
