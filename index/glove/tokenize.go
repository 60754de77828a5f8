package glove

import (
	"unicode"
	"unicode/utf8"
)

// tokenizer splits text the way GloVe's corpus was split (the Stanford PTB
// tokenizer, lowercased): words, hyphenated compounds and numbers stay whole,
// every punctuation mark or symbol is a token of its own, and contractions
// become GloVe's tokens ("don't" -> "do" "n't", "it's" -> "it" "'s").
type tokenizer struct {
	s      string
	i      int
	suffix string // a contraction split off the last word; it is the next token
}

// ASCII byte classes, so the common case costs a table load per byte.
const (
	cOther uint8 = iota
	cWord        // a-z, 0-9
	cUpper       // A-Z
	cSpace       // white space and control characters
)

var asciiClass = func() (c [utf8.RuneSelf]uint8) {
	for b := range c {
		switch {
		case 'a' <= b && b <= 'z' || '0' <= b && b <= '9':
			c[b] = cWord
		case 'A' <= b && b <= 'Z':
			c[b] = cUpper
		case b <= ' ' || b == 0x7f:
			c[b] = cSpace
		}
	}
	return c
}()

// next appends the next token to buf[:0] and returns it. Callers pass the
// previous token's slice back in, so a reused buffer makes tokenizing
// allocation-free (the buffer is a parameter, not a field, so that a caller's
// stack array does not escape).
func (t *tokenizer) next(buf []byte) ([]byte, bool) {
	buf = buf[:0]
	if t.suffix != "" {
		buf = append(buf, t.suffix...)
		t.suffix = ""
		return buf, true
	}
	r, n := t.skipSpace()
	if n == 0 {
		return buf, false
	}
	if !isWordRune(r) {
		buf = append(buf, t.s[t.i:t.i+n]...)
		t.i += n
		return buf, true
	}
	s := t.s
	i := t.i
	prev := r
	apos := false
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			// Copy a run of lowercase letters and digits at once.
			j := i
			for j < len(s) && s[j] < utf8.RuneSelf && asciiClass[s[j]] == cWord {
				j++
			}
			if j > i {
				buf = append(buf, s[i:j]...)
				prev = rune(s[j-1])
				i = j
				continue
			}
			if asciiClass[c] == cUpper {
				buf = append(buf, c+('a'-'A'))
				prev = rune(c)
				i++
				continue
			}
		}
		r, n := decode(s, i)
		if isWordRune(r) {
			buf = appendLower(buf, r)
			prev = r
			i += n
			continue
		}
		// A joiner belongs to the word only between two word runes: "e-mail",
		// "o'neill", "3.5", "10,000"; otherwise it is punctuation.
		if i+n >= len(s) {
			break
		}
		r2, _ := decode(s, i+n)
		if !isWordRune(r2) {
			break
		}
		if r == '-' {
			buf = append(buf, '-')
		} else if r == '\'' || r == '\u2019' {
			buf = append(buf, '\'')
			apos = true
		} else if (r == '.' || r == ',') && isDigit(prev) && isDigit(r2) {
			buf = append(buf, byte(r))
		} else {
			break
		}
		i += n
	}
	t.i = i
	if apos {
		buf = t.splitContraction(buf)
	}
	return buf, true
}

// skipSpace moves past white space, control characters and invalid UTF-8 and
// returns the rune found there, with n == 0 at the end of the text.
func (t *tokenizer) skipSpace() (rune, int) {
	for t.i < len(t.s) {
		c := t.s[t.i]
		if c < utf8.RuneSelf {
			if asciiClass[c] != cSpace {
				return rune(c), 1
			}
			t.i++
			continue
		}
		r, n := utf8.DecodeRuneInString(t.s[t.i:])
		if r != utf8.RuneError && !unicode.IsSpace(r) && !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r) {
			return r, n
		}
		t.i += n
	}
	return 0, 0
}

// contractions GloVe's tokenizer split off, longest first within each length.
var contractions = [...]string{"'re", "'ve", "'ll", "'s", "'m", "'d"}

// splitContraction returns the stem of word b and queues the clitic, as the
// PTB tokenizer does: "can't" -> "ca" "n't", "won't" -> "wo" "n't".
func (t *tokenizer) splitContraction(b []byte) []byte {
	if len(b) > 3 && string(b[len(b)-3:]) == "n't" {
		t.suffix = "n't"
		return b[:len(b)-3]
	}
	for _, c := range contractions {
		if len(b) > len(c) && string(b[len(b)-len(c):]) == c {
			t.suffix = c
			return b[:len(b)-len(c)]
		}
	}
	return b
}

func decode(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

func isDigit(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.IsDigit(r)
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

func appendLower(b []byte, r rune) []byte {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return append(b, byte(r))
	}
	return utf8.AppendRune(b, unicode.ToLower(r))
}

// stopwords are dropped before averaging: SIF's down-weighting alone leaves
// them enough weight to pull short texts together. The list is NLTK's English
// one without the fragments its tokenizer makes of contractions ("don",
// "couldn"; ours makes GloVe's instead, added below) and without words that
// are also content in chat ("won", "may" the month).
var stopwords = []string{
	"a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at",
	"be", "because", "been", "before", "being", "below", "between", "both", "but", "by",
	"can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further",
	"had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how",
	"i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself",
	"no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves",
	"out", "over", "own", "same", "she", "should", "so", "some", "such",
	"than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they",
	"this", "those", "through", "to", "too", "under", "until", "up", "very",
	"was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with",
	"would", "you", "your", "yours", "yourself", "yourselves",
	// GloVe's contraction tokens and the stems they leave ("ca" of "can't").
	"n't", "'s", "'m", "'re", "'ve", "'ll", "'d", "ca", "wo", "ai", "sha",
}
