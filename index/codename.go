package index

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	uctok "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/registry"
)

// codeTokenizer adds to Unicode word segmentation the names that code and
// tool output are full of: paths, file names, identifiers, error codes,
// versions. Word segmentation cut "reconcile_worker_v2.go" into
// "reconcile_worker_v2" and "go", so a search for the file was a search for
// either, and short messages that said "go vet" outranked the file; it kept
// "reconcile.go" whole, so a search for "reconcile" missed it. A code name
// (a run between spaces, stripped of enclosing punctuation, that joins
// letters or digits with _ . / \ - : # @ or changes case inside, with at most
// maxDigitGroups groups of digits, not ending in a number segment) now also
// gives its whole (of a path, its file's name: "reconcile_worker_v2.go" of
// "pkg/reconcile_worker_v2.go") and its parts of two or more characters
// ("reconcile", "worker", "v2"; "parse", "Config" of "parseConfig").
//
// Documents get all of them (codeIndex). A query's text clause has its words
// and wholes (codeQuery), and a clause of its parts (codeParts) joins at
// Options.PartBoost: asked for whole, a name's parts alone must not win
// ("reconcile" and "worker" in a short sentence outranked a long tool
// output with the file, BM25 being kind to short documents), but a part
// asked for ("conn_reset" of "ERR_CONN_RESET") still finds it.
type codeTokenizer struct {
	words *uctok.UnicodeTokenizer
	mode  codeMode
}

type codeMode int

const (
	codeIndex codeMode = iota // words, wholes and parts
	codeQuery                 // words and wholes
	codeParts                 // the parts no word of the text is
)

// The tokenizer types of the three modes.
const (
	codeTokenizerName = "ctxd_code"
	codeQueryName     = "ctxd_code_query"
	codePartsName     = "ctxd_code_parts"
)

func init() {
	for name, mode := range map[string]codeMode{codeTokenizerName: codeIndex, codeQueryName: codeQuery, codePartsName: codeParts} {
		err := registry.RegisterTokenizer(name, func(map[string]any, *registry.Cache) (analysis.Tokenizer, error) {
			return codeTokenizer{uctok.NewUnicodeTokenizer(), mode}, nil
		})
		if err != nil {
			panic(err)
		}
	}
}

// Tokenize returns the Unicode words of input, each code name's extra
// tokens after its words, at the position of its first word (codeParts:
// the extra tokens alone). The extra tokens are flagged KeyWord; nothing
// reads the flag but it marks them.
func (t codeTokenizer) Tokenize(input []byte) analysis.TokenStream {
	words := t.words.Tokenize(input)
	out := make(analysis.TokenStream, 0, len(words)+len(words)/4)
	w := 0 // the first word not yet passed on
	for start := 0; start < len(input); {
		if isSpaceAt(input, start) {
			start++
			continue
		}
		end := start
		for end < len(input) && !isSpaceAt(input, end) {
			end++
		}
		first := w
		for w < len(words) && words[w].Start < end {
			w++
		}
		if t.mode != codeParts {
			out = append(out, words[first:w]...)
		}
		if w > first && !plainWord(input, start, end, words[first:w]) {
			out = codeTokens(input, start, end, words[first:w], words[first].Position, t.mode, out)
		}
		start = end
	}
	if t.mode != codeParts {
		out = append(out, words[w:]...)
	}
	return out
}

// isSpaceAt reports whether input[i] is (or starts) a space: ASCII bytes
// from a table, others by their rune.
func isSpaceAt(input []byte, i int) bool {
	if b := input[i]; b < utf8.RuneSelf {
		return asciiSpace[b]
	}
	r, _ := utf8.DecodeRune(input[i:])
	return unicode.IsSpace(r)
}

var asciiSpace = [utf8.RuneSelf]bool{' ': true, '\n': true, '\t': true, '\r': true, '\v': true, '\f': true}

// plainWord reports whether a run is one word of lower-case ASCII letters
// and digits, give or take punctuation around it: most runs of prose, and
// nothing a code name could add to.
func plainWord(input []byte, start, end int, words analysis.TokenStream) bool {
	if len(words) != 1 {
		return false
	}
	for _, b := range input[words[0].Start:words[0].End] {
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9') {
			return false
		}
	}
	for _, b := range input[start:words[0].Start] {
		if b >= utf8.RuneSelf || isJoiner(b) {
			return false
		}
	}
	for _, b := range input[words[0].End:end] {
		if b >= utf8.RuneSelf || isJoiner(b) && !isTrailing(b) {
			return false
		}
	}
	return true
}

// codeTokens appends to out the tokens input[start:end] adds to the words
// segmentation found in it.
func codeTokens(input []byte, start, end int, words analysis.TokenStream, pos int, mode codeMode, out analysis.TokenStream) analysis.TokenStream {
	start, end = trimEnclosing(input, start, end)
	end = withoutLineNumbers(input, start, end)
	if !isCodeName(input[start:end]) || digitGroups(input[start:end]) > maxDigitGroups || endsInNumber(input, start, end) {
		return out
	}
	mine := len(out) // this run's extra tokens are out[mine:]
	has := func(s, e int) bool {
		for _, t := range words {
			if t.Start == s && t.End == e {
				return true
			}
		}
		for _, t := range out[mine:] {
			if t.Start == s && t.End == e {
				return true
			}
		}
		return false
	}
	add := func(s, e int) {
		if e-s < 2 || has(s, e) {
			return
		}
		out = append(out, &analysis.Token{Start: s, End: e, Term: slices.Clone(input[s:e]), Position: pos,
			Type: analysis.AlphaNumeric, KeyWord: true})
	}
	wholes, parts := mode != codeParts, mode != codeQuery
	// A path's whole is its file's name, the last segment, when that is a
	// name itself ("reconcile_worker_v2.go" of "internal/jobs/
	// reconcile_worker_v2.go"; "internal/jobs" stays whole): its directories
	// are words, and whole, nearly every path a tool printed was a term of
	// its own. On log-like tool outputs the full paths were 13,000 of the
	// 20,000 terms code names added to 82,000 words, and merging segments
	// costs by their dictionaries' size.
	if wholes {
		s := end
		for s > start && !isSegmentSep(input[s-1]) {
			s--
		}
		ss, se := trimEnclosing(input, s, end)
		last := ss > start && isCodeName(input[ss:se])
		if last {
			add(ss, se)
		} else {
			add(start, end)
		}
	}
	// Parts: runs of letters and digits, cut again where the case turns up
	// ("parseConfig", "HTTPServer" -> "HTTP", "Server").
	for s := start; parts && s < end; {
		r, n := utf8.DecodeRune(input[s:])
		if !isWordRune(r) {
			s += n
			continue
		}
		e, prev := s, rune(0)
		partStart := s
		for e < end {
			r, n := utf8.DecodeRune(input[e:])
			if !isWordRune(r) {
				break
			}
			if e > partStart && caseTurn(input, e, prev, r, end) {
				add(partStart, e)
				partStart = e
			}
			prev = r
			e += n
		}
		if partStart > s || e-s < end-start {
			add(partStart, e)
		}
		s = e
	}
	return out
}

// caseTurn reports whether a new part begins at input[i] (rune r, after
// prev): lower to upper ("parseConfig"), or the last capital of a run before
// a lower-case letter ("HTTPServer").
func caseTurn(input []byte, i int, prev, r rune, end int) bool {
	if !unicode.IsUpper(r) {
		return false
	}
	if unicode.IsLower(prev) {
		return true
	}
	if !unicode.IsUpper(prev) {
		return false
	}
	next, _ := utf8.DecodeRune(input[i+utf8.RuneLen(r) : end])
	return unicode.IsLower(next)
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// isJoiner is what joins the parts of a code name.
func isJoiner(b byte) bool {
	switch b {
	case '_', '.', '/', '\\', '-', ':', '#', '@':
		return true
	}
	return false
}

// isSegmentSep separates the segments of a path or an assignment.
func isSegmentSep(b byte) bool {
	switch b {
	case '/', '\\', ':', '@', ',':
		return true
	}
	return false
}

// trimEnclosing strips what commonly surrounds a name in text: quotes,
// brackets and a sentence's punctuation.
func trimEnclosing(input []byte, start, end int) (int, int) {
	for start < end && isEnclosing(input[start]) {
		start++
	}
	for end > start && (isEnclosing(input[end-1]) || isTrailing(input[end-1])) {
		end--
	}
	return start, end
}

func isEnclosing(b byte) bool {
	switch b {
	case '"', '\'', '`', '(', ')', '[', ']', '{', '}', '<', '>', '*', ',', ';':
		return true
	}
	return false
}

func isTrailing(b byte) bool {
	switch b {
	case '.', ':', '!', '?':
		return true
	}
	return false
}

// isCodeName reports whether s joins letters or digits with a joiner, or
// turns from lower to upper case inside: a name rather than a word.
func isCodeName(s []byte) bool {
	words, joined, turn := 0, false, false
	in := false
	var prev rune
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		switch {
		case isWordRune(r):
			if !in {
				words++
				in = true
			}
			if unicode.IsUpper(r) && unicode.IsLower(prev) {
				turn = true
			}
		case r < utf8.RuneSelf && isJoiner(byte(r)):
			in = false
			joined = joined || words > 0
		default:
			return false // other punctuation, symbols, emoji: not a name
		}
		prev = r
		i += n
	}
	return (joined && words >= 2) || turn
}

// hasCodeName reports whether text has a code name: whether the wholes
// clause could match anything.
func hasCodeName(text string) bool {
	for _, f := range strings.Fields(text) {
		b := []byte(f)
		if s, e := trimEnclosing(b, 0, len(b)); isCodeName(b[s:e]) {
			return true
		}
	}
	return false
}

// span is a token's bytes; a code name's words follow its whole in a query's
// tokens, inside its span, and rewriting a query keeps only the whole.
type span struct{ start, end int }

func (s span) holds(start, end int) bool { return s.end > s.start && start >= s.start && end <= s.end }

// maxDigitGroups: a run with more groups of digits than this is a time,
// an address or a path of ids ("2026-01-02T15:04:05.000Z", "/api/v2/
// orders/8812/items/3"), nearly every one of them distinct. Their words
// are terms already; whole they only grew the dictionary: on log-like tool
// outputs, indexing all of them cost 2.5 times the CPU of words alone.
const maxDigitGroups = 3

func digitGroups(s []byte) int {
	n := 0
	for i := range s {
		if isDigitByte(s[i]) && (i == 0 || !isDigitByte(s[i-1])) {
			n++
		}
	}
	return n
}

// endsInNumber reports whether a name's last segment is a number: a path
// of ids ("/api/v2/orders/8812", "jobs/42"), each one an instance that a
// request, a log line or a run named once. On log-like tool outputs they
// were a third of the terms code names added, nearly all seen once, and
// their words (the resource, the number) are terms anyway.
func endsInNumber(input []byte, start, end int) bool {
	i := end
	for i > start && isDigitByte(input[i-1]) {
		i--
	}
	return i < end && i > start && isSegmentSep(input[i-1])
}

func isDigitByte(b byte) bool { return b >= '0' && b <= '9' }

// withoutLineNumbers cuts ":42" and ":42:7" off the end of a name: a file
// and line ("main.go:42") is a new term at every line, its file and number
// are terms anyway, and the file whole is the one people search for.
func withoutLineNumbers(input []byte, start, end int) int {
	for {
		i := end
		for i > start && isDigitByte(input[i-1]) {
			i--
		}
		if i == end || i-1 <= start || input[i-1] != ':' {
			return end
		}
		end = i - 1
	}
}
