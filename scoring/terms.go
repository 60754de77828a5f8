package scoring

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is what sort of term a Term is. It decides how much a later repetition
// of the term says that the later message refers back.
type Kind uint8

const (
	// KindWord is a plain word; it counts only when rare in the session.
	KindWord Kind = iota + 1
	// KindNumber: 3+ digits, a decimal, a unit, a currency or a percentage.
	KindNumber
	// KindQuote is a quoted string of several words.
	KindQuote
	// KindIdent is a code-like token: snake_case, camelCase, CONSTANT_CASE,
	// letters with digits (v2, abc123, hex ids), PROJ-123, a.b, UUIDs.
	KindIdent
	// KindPath is a file path or file name.
	KindPath
	// KindURL is a URL with a scheme.
	KindURL
	// KindMention is a message's id written in a later message. Terms never
	// returns it: only ScoreAll knows the ids.
	KindMention

	// kindField is a whole field handed to the id matcher, never a term.
	kindField
)

var kindNames = [...]string{"", "word", "number", "quote", "ident", "path", "url", "mention"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && k > 0 {
		return kindNames[k]
	}
	return "unknown"
}

// MarshalText makes kinds read as names in JSON.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Term is one distinctive term of a text, normalised for matching (lower
// case, a path without "./" or ":line", a number without thousands commas).
type Term struct {
	Text string `json:"text"`
	Kind Kind   `json:"kind"`
}

// Terms returns the distinct terms of text in order of first appearance, each
// with the strongest kind it was seen as. It is the extractor the references
// component uses, exported to test and explain it.
func Terms(text string) []Term {
	var out []Term
	seen := map[string]int{}
	s := scanner{emit: func(key []byte, k Kind) {
		if k == KindWord && stopwords[string(key)] {
			return
		}
		if i, ok := seen[string(key)]; ok {
			if kindWeight[k] > kindWeight[out[i].Kind] {
				out[i].Kind = k
			}
			return
		}
		seen[string(key)] = len(out)
		out = append(out, Term{string(key), k})
	}}
	s.scan(text)
	return out
}

// Longer fields are blobs (base64, minified code): no one repeats them.
const maxField = 256

const maxQuote = 200

// Flags of ASCII bytes, gathered over a field in the pass that finds it, so
// that most fields (plain words) need no second look.
const (
	fLower uint16 = 1 << iota
	fUpper
	fDigit
	fUnder
	fSoft  // may sit inside a term: . : @ # $ % + - ~ &
	fSlash // / or \
	fNonASCII
	fBreak // space, or punctuation that never sits inside a term
)

var flags [utf8.RuneSelf]uint16

func init() {
	for c := range utf8.RuneSelf {
		f := fBreak
		switch {
		case c >= 'a' && c <= 'z':
			f = fLower
		case c >= 'A' && c <= 'Z':
			f = fUpper
		case c >= '0' && c <= '9':
			f = fDigit
		case c == '_':
			f = fUnder
		case c == '/' || c == '\\':
			f = fSlash
		case strings.IndexByte(".:@#$%+-~&", byte(c)) >= 0:
			f = fSoft
		}
		flags[c] = f
	}
}

func flagsOf(f string) uint16 {
	var fl uint16
	for i := 0; i < len(f); i++ {
		if b := f[i]; b < utf8.RuneSelf {
			fl |= flags[b]
		} else {
			fl |= fNonASCII
		}
	}
	return fl
}

// wordRune reports whether a non-ASCII rune belongs in a term; other runes
// (spaces, dashes, curly quotes, symbols) split fields.
func wordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// scanner turns text into terms, calling emit for each (duplicates
// included). emit gets a key in a scratch buffer that it must copy to keep.
// Plain words come stemmed but not stop-listed: the consumer drops
// stopwords, which costs it no extra lookup.
type scanner struct {
	emit func(key []byte, k Kind)
	// Fields whose length is in [idMin, idMax] are also emitted whole as
	// kindField, for id matching; idMax 0 turns that off.
	idMin, idMax int
	buf          []byte
}

// scan cuts text into fields at spaces and punctuation in one pass, except
// that a URL is taken whole (it holds ?, = and the like), and a comma
// between digits (1,234) does not cut.
func (s *scanner) scan(text string) {
	quoted := false
	n := len(text)
	for i := 0; i < n; {
		if b := text[i]; b < utf8.RuneSelf {
			if flags[b] == fBreak {
				quoted = quoted || b == '"' || b == '\'' || b == '`'
				i++
				continue
			}
		} else if r, size := utf8.DecodeRuneInString(text[i:]); !wordRune(r) {
			quoted = quoted || r == '“'
			i += size
			continue
		}
		j, fl, url := i, uint16(0), false
		for j < n {
			b := text[j]
			if b >= utf8.RuneSelf {
				r, size := utf8.DecodeRuneInString(text[j:])
				if !wordRune(r) {
					break
				}
				fl |= fNonASCII
				j += size
				continue
			}
			f := flags[b]
			if f == fBreak && !thousands(text, j) {
				break
			}
			if b == ':' && strings.HasPrefix(text[j:], "://") {
				if e := s.url(text, i, j); e > 0 {
					j, url = e, true
					break
				}
			}
			fl |= f
			j++
		}
		if !url {
			s.field(text[i:j], fl)
		}
		i = j
	}
	if quoted {
		s.quotes(text)
	}
}

// thousands reports whether f[i] is a comma between digits, as in 1,234.
func thousands(f string, i int) bool {
	return f[i] == ',' && i > 0 && i+1 < len(f) && isDigit(f[i-1]) && isDigit(f[i+1])
}

// url emits the URL whose "://" is at k in a field starting at i, and the
// field's text before the scheme; it returns where the URL ends, or 0 if
// there is no URL after all.
func (s *scanner) url(text string, i, k int) int {
	start := k
	for start > i && isSchemeByte(text[start-1]) {
		start--
	}
	end := k + 3
	for end < len(text) && text[end] > ' ' && text[end] < utf8.RuneSelf && strings.IndexByte("\"'<>`|{}[]()", text[end]) < 0 {
		end++
	}
	for end > k+3 && strings.IndexByte(".,;:!?", text[end-1]) >= 0 {
		end--
	}
	if start == k || end == k+3 {
		return 0
	}
	if start > i {
		s.field(text[i:start], flagsOf(text[i:start]))
	}
	if end-start <= 4*maxField {
		u := s.lower(text[start:end])
		for len(u) > 0 && u[len(u)-1] == '/' {
			u = u[:len(u)-1]
		}
		s.emit(u, KindURL)
	}
	return end
}

func isSchemeByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '+' || b == '.' || b == '-'
}

// field classifies one field; fl are its flags.
func (s *scanner) field(f string, fl uint16) {
	if fl&(fSoft|fSlash) != 0 {
		if t := trimField(f); len(t) != len(f) {
			f, fl = t, flagsOf(t)
		}
	}
	if f == "" || len(f) > maxField {
		return
	}
	if s.idMax > 0 && len(f) >= s.idMin && len(f) <= s.idMax {
		s.emit(s.lower(f), kindField)
	}
	switch {
	case fl&^(fLower|fUpper) == 0:
		s.plain(f, fl)
	case fl&fDigit != 0 && s.number(f):
	case fl&fSlash != 0:
		s.path(f)
	case fl&fSoft != 0:
		if isUUID(f) {
			s.emit(s.lower(f), KindIdent)
			return
		}
		s.compound(f)
	default:
		s.word(f, fl)
	}
}

// plain handles a field of ASCII letters, most of any text.
func (s *scanner) plain(f string, fl uint16) {
	if len(f) < 3 {
		return
	}
	if fl == fLower|fUpper && codeLike(f) {
		s.emit(s.lower(f), KindIdent)
		return
	}
	s.emit(stem(s.lower(f)), KindWord)
}

// trimField drops the punctuation around a term, keeping what starts one:
// "./", "../", "~/", "/", "\", "-flag", "#12", "$400", ".env".
func trimField(f string) string {
	for f != "" {
		c := f[0]
		if c >= utf8.RuneSelf || flags[c] != fSoft {
			break
		}
		keep := false
		switch c {
		case '.':
			keep = strings.HasPrefix(f, "./") || strings.HasPrefix(f, "../") || len(f) > 1 && isAlnum(f[1])
		case '-', '#', '$':
			keep = len(f) > 1 && (isAlnum(f[1]) || c == '-' && f[1] == '-' && len(f) > 2 && isAlnum(f[2]))
		case '~':
			keep = strings.HasPrefix(f, "~/")
		}
		if keep {
			break
		}
		f = f[1:]
	}
	for f != "" {
		c := f[len(f)-1]
		if c >= utf8.RuneSelf || flags[c]&(fSoft|fSlash) == 0 || c == '%' {
			break
		}
		f = f[:len(f)-1]
	}
	return f
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b >= utf8.RuneSelf
}

func isSpaceByte(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// number reports whether f is numeric ($1,200.50, 3.14, 20ms, 50%, 8080,
// 2024-05-01, 10.0.0.1), emitting it if it is distinctive enough. Short bare
// numbers and ordinals are consumed silently: "3" or "2nd" identify nothing.
func (s *scanner) number(f string) bool {
	i := 0
	currency := f[0] == '$'
	if currency {
		i++
	}
	if i < len(f) && (f[i] == '-' || f[i] == '+') {
		i++
	}
	start := i
	digits, decimal := 0, false
	for i < len(f) {
		c := f[i]
		if isDigit(c) {
			digits++
			i++
			continue
		}
		if strings.IndexByte(".,:/-", c) >= 0 && i > start && i+1 < len(f) && isDigit(f[i+1]) {
			decimal = decimal || c == '.'
			i++
			continue
		}
		break
	}
	if digits == 0 {
		return false
	}
	numEnd := i
	unit := f[i:]
	switch {
	case unit == "":
	case unit == "%":
	case isOrdinal(unit) && digits <= 4:
		return true
	case units[strings.ToLower(unit)]:
	default:
		return false
	}
	marked := currency || unit != ""
	if digits < 3 && !decimal && !marked {
		return true
	}
	key := s.buf[:0]
	for j := 0; j < len(f); j++ {
		if c := f[j]; c != ',' && !(j < start && c != '$') {
			key = append(key, lowerByte(c))
		}
	}
	s.buf = key
	s.emit(key, KindNumber)
	if marked && (digits >= 3 || decimal) {
		key = key[:0]
		for j := start; j < numEnd; j++ {
			if f[j] != ',' {
				key = append(key, f[j])
			}
		}
		s.buf = key
		s.emit(key, KindNumber)
	}
	return true
}

func isOrdinal(u string) bool {
	switch strings.ToLower(u) {
	case "st", "nd", "rd", "th":
		return true
	}
	return false
}

var units = setOf("ms", "s", "sec", "secs", "m", "min", "mins", "h", "hr", "hrs", "d", "ns", "us", "µs",
	"b", "k", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib", "bytes", "x", "px", "em", "rem", "pt",
	"hz", "khz", "mhz", "ghz", "kbps", "mbps", "gbps", "rps", "qps", "tps", "ops", "mm", "cm", "km", "kg",
	"g", "mg", "l", "ml", "c", "f", "v", "w", "kw", "mw", "usd", "eur", "gbp", "y", "yr", "yrs", "wk")

// path emits a file path (and its base name, which later messages often use
// alone). "and/or" or "TCP/IP" are not paths: their parts are words.
func (s *scanner) path(f string) {
	isPath := false
	switch {
	case len(f) >= 3 && isLetter(f[0]) && f[1] == ':' && (f[2] == '\\' || f[2] == '/'):
		isPath = true
	case f[0] == '/' || f[0] == '\\' || strings.HasPrefix(f, "./") || strings.HasPrefix(f, "../") || strings.HasPrefix(f, "~/"):
		isPath = true
	case strings.ContainsRune(f, '\\') || strings.Count(f, "/") >= 2:
		isPath = true
	default:
		isPath = hasExt(f[strings.LastIndexByte(f, '/')+1:])
	}
	if !isPath {
		for part := range strings.SplitSeq(f, "/") {
			s.field(part, flagsOf(part))
		}
		return
	}
	p := stripLine(f)
	p = strings.TrimPrefix(p, "./")
	if !strings.ContainsFunc(p, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return
	}
	s.emit(s.lower(p), KindPath)
	if i := strings.LastIndexAny(p, `/\`); i >= 0 && hasExt(p[i+1:]) {
		s.emit(s.lower(p[i+1:]), KindPath)
	}
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// stripLine drops a ":12" or ":12:3" position, as compilers print it.
func stripLine(p string) string {
	for range 2 {
		i := strings.LastIndexByte(p, ':')
		if i <= 1 || i == len(p)-1 {
			break
		}
		allDigits := true
		for j := i + 1; j < len(p); j++ {
			allDigits = allDigits && isDigit(p[j])
		}
		if !allDigits {
			break
		}
		p = p[:i]
	}
	return p
}

// hasExt reports whether name looks like a file name: a stem, a dot, and a
// short extension holding a letter.
func hasExt(name string) bool {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || len(name)-i-1 < 1 || len(name)-i-1 > 5 {
		return false
	}
	letter := false
	for j := i + 1; j < len(name); j++ {
		if !isAlnum(name[j]) {
			return false
		}
		letter = letter || isLetter(name[j])
	}
	return letter
}

func isUUID(f string) bool {
	if len(f) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := f[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !(isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// compound handles a field with inner punctuation: os.ReadFile, PROJ-4521,
// bob@x.io, #123, --dry-run, config.yaml, well-known. The whole is a term
// when it looks like code; the parts are always terms of their own, so
// "ReadFile" later still matches "os.ReadFile".
func (s *scanner) compound(f string) {
	if stopwords[string(s.lower(f))] {
		return
	}
	parts, code := 0, false
	for part := range strings.FieldsFuncSeq(f, isSoftRune) {
		parts++
		code = code || codeLike(part)
	}
	var kind Kind
	switch {
	case strings.IndexByte("#$-", f[0]) >= 0 || strings.ContainsAny(f, "@") || strings.Contains(f, "::"):
		kind = KindIdent
	case strings.ContainsRune(f, '.'):
		f = stripLine(f)
		kind = KindIdent
		if hasExt(f) || f[0] == '.' {
			kind = KindPath
		}
	case code:
		kind = KindIdent
	}
	// A single part is the whole only without a marker: "#12" and "--force"
	// differ from "12" and "force".
	if kind != 0 && (parts >= 2 || strings.IndexByte("#$-.", f[0]) >= 0) {
		s.emit(s.lower(f), kind)
	}
	for part := range strings.FieldsFuncSeq(f, isSoftRune) {
		s.word(part, flagsOf(part))
	}
}

func isSoftRune(r rune) bool { return r < utf8.RuneSelf && flags[r] == fSoft }

// codeLike reports whether a word is written the way code is: with a digit,
// an underscore or a capital after a small letter.
func codeLike(w string) bool {
	prevLower := false
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case isDigit(c) || c == '_':
			return true
		case c >= 'A' && c <= 'Z':
			if prevLower {
				return true
			}
			prevLower = false
		default:
			prevLower = c >= 'a' && c <= 'z'
		}
	}
	return false
}

// word classifies a run of word characters (letters, digits, underscores)
// with flags fl.
func (s *scanner) word(w string, fl uint16) {
	switch {
	case fl&(fLower|fUpper|fNonASCII) == 0:
		if digits := len(w) - strings.Count(w, "_"); digits >= 3 {
			s.emit(s.lower(strings.ReplaceAll(w, "_", "")), KindNumber)
		}
	case fl&fDigit != 0 && isDigit(w[0]) && s.number(w):
	case fl&(fDigit|fUnder) != 0 || codeLike(w):
		s.emit(s.lower(w), KindIdent)
	default:
		if key := s.lower(w); len(key) >= 3 {
			s.emit(stem(key), KindWord)
		}
	}
}

// stem folds the commonest plural endings so "timeouts" meets "timeout".
// Anything cleverer costs more than rare-word matching is worth.
func stem(w []byte) []byte {
	n := len(w)
	if n < 5 || w[n-1] != 's' || w[n-2] == 's' || w[n-2] == 'u' || w[n-2] == 'i' {
		return w
	}
	switch {
	case w[n-3] == 'i' && w[n-2] == 'e': // queries
		w[n-3] = 'y'
		return w[:n-2]
	case w[n-4] == 's' && w[n-3] == 's' && w[n-2] == 'e': // classes, not bases
		return w[:n-2]
	}
	return w[:n-1]
}

// quotes emits quoted strings of several words ("connection reset by peer");
// a quoted single word is left to the field pass, which classifies it
// better. Code fences are skipped, their content is scanned as text.
func (s *scanner) quotes(text string) {
	for i := 0; i < len(text); i++ {
		var open, close string
		switch text[i] {
		case '"':
			open, close = `"`, `"`
		case '`':
			if strings.HasPrefix(text[i:], "```") {
				for i+1 < len(text) && text[i+1] == '`' {
					i++
				}
				continue
			}
			open, close = "`", "`"
		case '\'':
			if i > 0 && !isSpaceByte(text[i-1]) && strings.IndexByte("([{", text[i-1]) < 0 {
				continue
			}
			open, close = "'", "'"
		case 0xE2:
			if !strings.HasPrefix(text[i:], "“") {
				continue
			}
			open, close = "“", "”"
		default:
			continue
		}
		body := i + len(open)
		end := s.closing(text, body, close)
		if end < 0 {
			continue
		}
		s.quote(text[body:end])
		i = end + len(close) - 1
	}
}

// closing finds where a quote opened at body ends, on the same line and
// within maxQuote bytes; -1 if it does not. A single quote closes only
// before a space or punctuation, so "don't" does not close 'this.
func (s *scanner) closing(text string, body int, close string) int {
	limit := min(len(text), body+maxQuote+len(close))
	for j := body; j < limit; j++ {
		if text[j] == '\n' {
			return -1
		}
		if !strings.HasPrefix(text[j:], close) {
			continue
		}
		if close == "'" {
			if j == body || text[j-1] == ' ' {
				continue
			}
			if k := j + 1; k < len(text) && (text[k] >= utf8.RuneSelf || flags[text[k]]&(fLower|fUpper|fDigit|fUnder) != 0) {
				continue
			}
		}
		return j
	}
	return -1
}

func (s *scanner) quote(q string) {
	q = strings.TrimSpace(q)
	if len(q) < 5 || !strings.ContainsAny(q, " \t") {
		return
	}
	key := s.buf[:0]
	space := false
	for _, r := range q {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			key = append(key, ' ')
			space = false
		}
		key = utf8.AppendRune(key, unicode.ToLower(r))
	}
	for len(key) > 0 && strings.IndexByte(".,;:!?", key[len(key)-1]) >= 0 {
		key = key[:len(key)-1]
	}
	s.buf = key
	s.emit(key, KindQuote)
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// lower writes the lower-case form of f into the scratch buffer.
func (s *scanner) lower(f string) []byte {
	b := s.buf[:0]
	for i := 0; i < len(f); i++ {
		if f[i] >= utf8.RuneSelf {
			b = b[:0]
			for _, r := range f {
				b = utf8.AppendRune(b, unicode.ToLower(r))
			}
			break
		}
		b = append(b, lowerByte(f[i]))
	}
	s.buf = b
	return b
}

// stopWords returns the set of words and their stems (the scanner hands
// out stems).
func stopWords(words ...string) map[string]bool {
	m := setOf(words...)
	for _, w := range words {
		m[string(stem([]byte(w)))] = true
	}
	return m
}

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// stopwords are words too common to identify a message, in chat as in
// prose. Words of under three letters are dropped anyway.
var stopwords = stopWords(
	"the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "had", "her", "was", "one", "our",
	"out", "has", "him", "his", "how", "its", "may", "new", "now", "old", "see", "two", "way", "who", "did",
	"yes", "yet", "get", "got", "let", "say", "she", "too", "use", "off", "own", "why", "try", "put", "via",
	"also", "been", "both", "does", "done", "each", "else", "even", "from", "have", "here", "into", "just",
	"like", "made", "make", "many", "more", "most", "much", "must", "need", "only", "over", "same", "some",
	"such", "than", "that", "them", "then", "there", "these", "they", "this", "those", "very", "want", "well",
	"were", "what", "when", "where", "which", "while", "will", "with", "would", "your", "yours", "about",
	"after", "again", "being", "below", "could", "doing", "during", "every", "first", "going", "great",
	"having", "just", "know", "last", "least", "less", "look", "might", "never", "other", "ought", "really",
	"right", "should", "since", "still", "their", "theirs", "thing", "things", "think", "though", "through",
	"under", "until", "used", "using", "want", "wants", "because", "before", "between", "cannot", "itself",
	"myself", "anything", "something", "nothing", "everything", "someone", "anyone", "maybe", "sure",
	"okay", "yeah", "thanks", "thank", "please", "hey", "hello", "hmm", "good", "nice", "lot", "lots",
	"sounds", "sound", "glad", "cool", "awesome", "wow", "totally", "definitely", "actually", "pretty",
	"kind", "sort", "way", "ways", "let's", "i'm", "it's", "don", "doesn", "didn", "isn", "wasn", "aren",
	"won", "wouldn", "couldn", "shouldn", "haven", "hasn", "ll", "ve", "re", "etc", "e.g", "i.e", "vs",
	"a.m", "p.m", "via", "per", "take", "takes", "took", "come", "came", "give", "gave", "keep", "kept",
	"tell", "told", "said", "says", "mean", "means", "seem", "seems", "feel", "feels", "felt", "find",
	"found", "able", "sometimes", "always", "often", "already", "however", "instead", "though", "whether",
	"whose", "whom", "yourself", "ourselves", "themselves", "herself", "himself", "again", "once", "another",
	"around", "across", "along", "among", "away", "back", "down", "enough", "far", "few", "further", "here's",
	"there's", "what's", "quite", "rather", "soon", "today", "tomorrow", "yesterday", "time", "times", "day",
	"days", "year", "years", "lol", "haha", "hope", "love", "happy", "fun", "bit", "little", "big", "long",
)
