// Package glove embeds text with pretrained GloVe word vectors: a SIF-weighted
// average of the words' vectors (Arora et al., "A simple but tough-to-beat
// baseline for sentence embeddings", 2017) with a fixed common direction
// removed. It needs no network and no model server, and vectors depend only on
// the text and the vector file, never on what else has been embedded, so stored
// vectors stay valid for as long as Model() names the same model.
package glove

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/ctxd/ctxd/data"
	"github.com/ctxd/ctxd/index/glove/vecfile"
)

// algoVersion goes into the model name: bump it whenever a change here
// (tokenizer, stopwords, weights, common direction) changes any vector.
const algoVersion = 1

// sifA is SIF's smoothing constant: a word's weight is a/(a+p(w)). 1e-3 is
// the paper's choice; on our probes 3e-4 did worse and 3e-3..1e-2 no better.
const sifA = 1e-3

// Word kinds, which decide whether a word is averaged.
const (
	kindContent uint8 = iota
	kindStop
	kindPunct // no letter or digit: never averaged
)

// Model is a loaded vector file. It is immutable after Load, except for the
// neighbour cache, which has its own lock, so it is safe for concurrent use.
type Model struct {
	name   string
	dim    int
	f      *vecfile.File
	words  []string
	index  map[string]int32
	weight []float32 // per row: SIF weight times scale, so averaging is one multiply
	kind   []uint8
	common []float32 // unit vector removed from every embedding

	normsOnce sync.Once
	invNorm   []float32 // 1/|int8 row|, for Neighbours

	// rows holds every row's codes back to back, without the scales the
	// file puts between them, so that one assembly call scans them all
	// (Neighbours). Built on the first scan that uses the assembly: 10 MB
	// for the embedded 100k 100-d rows (10,000,000 bytes; the heap grew by
	// 10.4 MB with the scan's 400 KB of dot products), which buys a scan
	// ~7 times faster than reading the file's rows one by one.
	rowsOnce sync.Once
	rows     []int8

	nbMu    sync.Mutex
	nbCache map[string]nbEntry
}

// Load parses a vector file written by vecfile.Encode. The model keeps b and reads the
// rows from it in place: b must not be modified afterwards.
func Load(b []byte) (*Model, error) {
	f, err := vecfile.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("glove: %w", err)
	}
	n := len(f.Words)
	m := &Model{
		name:    fmt.Sprintf("glove-6b-%dd-sif-v%d-%dk-%08x", f.Dim, algoVersion, (n+500)/1000, f.CRC),
		dim:     f.Dim,
		f:       f,
		words:   f.Words,
		index:   f.Index,
		weight:  make([]float32, n),
		kind:    make([]uint8, n),
		nbCache: make(map[string]nbEntry),
	}
	stop := make(map[string]bool, len(stopwords))
	for _, w := range stopwords {
		stop[w] = true
	}
	// p(w) from the rank by Zipf's law, p(r) = 1/(r*H(V)) over the source
	// vocabulary: the corpus counts are not in the file and the rank is what
	// the counts would mostly tell.
	hv := harmonic(f.Vocab)
	for i, w := range f.Words {
		p := 1 / (float64(i+1) * hv)
		m.weight[i] = float32(sifA/(sifA+p)) * f.Scale[i]
		switch {
		case !hasAlnum(w):
			m.kind[i] = kindPunct
		case stop[w]:
			m.kind[i] = kindStop
		}
	}
	m.common = m.commonDirection()
	return m, nil
}

var (
	defaultOnce  sync.Once
	defaultModel *Model
	defaultErr   error
)

// Default returns the model of the vector file embedded in the binary, loaded
// on first use and shared afterwards.
func Default() (*Model, error) {
	defaultOnce.Do(func() {
		defaultModel, defaultErr = Load(data.GloVe)
		if defaultErr != nil {
			defaultErr = fmt.Errorf("glove: embedded vectors: %w", defaultErr)
		}
	})
	return defaultModel, defaultErr
}

// Model names the model and the data: it changes when the vector file or the
// algorithm changes, so vectors of different versions are never compared.
func (m *Model) Model() string { return m.name }

// Dim is the vector length.
func (m *Model) Dim() int { return m.dim }

// Words is the number of words the model knows.
func (m *Model) Words() int { return len(m.words) }

// Embed returns one unit vector per text, safe for concurrent use. Stopwords
// and punctuation are left out unless a text has nothing else ("how are
// you?"). A text with no word the model knows
// (empty, only numbers, ids or emoji) gets the model's common direction, which
// every other vector has been made orthogonal to: its cosine is 0 with every
// text that has known words and 1 with other such texts. A zero vector would
// be more honest but ranks nothing (chromem-go, which held the vectors
// once, even turned it into NaNs), and vectors already stored keep this one.
func (m *Model) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("glove: embed: %w", err)
			}
		}
		out[i] = m.embed(text, sifConfig)
	}
	return out, nil
}

// Tokens splits text into GloVe's tokens: lowercased words, numbers and
// hyphenated compounds, contraction clitics ("n't", "'s") and one token per
// punctuation mark or symbol.
func (m *Model) Tokens(text string) []string {
	var stack [64]byte
	tok := stack[:0]
	t := tokenizer{s: text}
	toks := make([]string, 0, len(text)/5+1)
	for {
		var ok bool
		if tok, ok = t.next(tok); !ok {
			return toks
		}
		toks = append(toks, string(tok))
	}
}

// embedConfig selects the parts of the method; tests compare them.
type embedConfig struct {
	sif          bool // SIF weights instead of a plain mean
	dropStop     bool // stopwords only count when a text has nothing else
	removeCommon bool
}

var sifConfig = embedConfig{sif: true, dropStop: true, removeCommon: true}

// embed computes one vector. Products are converted explicitly before they
// are summed: that forbids the compiler to fuse them into FMA instructions,
// which it does on arm64 but not amd64, so a text gets bit-identical vectors
// on every platform.
func (m *Model) embed(text string, cfg embedConfig) []float32 {
	v := make([]float32, m.dim)
	if !m.accumulate(v, text, cfg, false) && cfg.dropStop {
		m.accumulate(v, text, cfg, true)
	}
	if cfg.removeCommon {
		var p float32
		for k, c := range m.common {
			p += float32(v[k] * c)
		}
		for k, c := range m.common {
			v[k] -= float32(p * c)
		}
	}
	var ss float64
	for _, x := range v {
		ss += float64(float64(x) * float64(x))
	}
	if ss < 1e-20 {
		copy(v, m.common)
		return v
	}
	inv := 1 / math.Sqrt(ss)
	for k, x := range v {
		v[k] = float32(float64(x) * inv)
	}
	return v
}

// accumulate adds the weighted vectors of text's words to v and reports
// whether it added any. With stops set it adds the stopwords instead of the
// content words: the fallback for a text made only of stopwords.
func (m *Model) accumulate(v []float32, text string, cfg embedConfig, stops bool) bool {
	var stack [64]byte
	tok := stack[:0]
	t := tokenizer{s: text}
	added := false
	for {
		var ok bool
		if tok, ok = t.next(tok); !ok {
			return added
		}
		if len(tok) == 1 && tok[0] < utf8.RuneSelf && asciiClass[tok[0]] != cWord {
			continue // punctuation: never averaged, not worth a lookup
		}
		if id, ok := m.index[string(tok)]; ok {
			added = m.add(v, id, cfg, stops) || added
			continue
		}
		// GloVe knows most compounds whole; for the others ("deploy-time",
		// "o'brien") the parts still say something.
		if indexJoiner(tok) < 0 {
			continue
		}
		for rest := tok; len(rest) > 0; {
			part := rest
			if j := indexJoiner(rest); j >= 0 {
				part, rest = rest[:j], rest[j+1:]
			} else {
				rest = nil
			}
			if id, ok := m.index[string(part)]; ok {
				added = m.add(v, id, cfg, stops) || added
			}
		}
	}
}

func (m *Model) add(v []float32, id int32, cfg embedConfig, stops bool) bool {
	switch k := m.kind[id]; {
	case k == kindPunct:
		return false
	case cfg.dropStop && (k == kindStop) != stops:
		return false
	}
	w := m.f.Scale[id]
	if cfg.sif {
		w = m.weight[id]
	}
	row := m.f.Row(int(id))
	row = row[:len(v)]
	for k := range v {
		v[k] += float32(w * float32(int8(row[k])))
	}
	return true
}

// commonDirection is the direction SIF removes: the first principal component
// of sentence vectors, dominated by what all text shares (frequent words,
// syntax). Estimated from the vocabulary alone, not from the data being
// indexed, so vectors do not drift as the index grows. For random sentences of
// content words drawn with probability p(w), the uncentred second moment of
// their SIF vectors is a mix of mu*mu^T (mu the expected weighted word vector)
// and a spread term that shrinks with length; mu dominates it, so its
// direction is taken.
func (m *Model) commonDirection() []float32 {
	hv := harmonic(m.f.Vocab)
	mu := make([]float64, m.dim)
	for i := range m.words {
		if m.kind[i] != kindContent {
			continue
		}
		p := 1 / (float64(i+1) * hv)
		w := p * float64(m.weight[i])
		for k, q := range m.f.Row(i) {
			mu[k] += float64(w * float64(int8(q)))
		}
	}
	var ss float64
	for _, x := range mu {
		ss += float64(x * x)
	}
	c := make([]float32, m.dim)
	if ss == 0 {
		c[0] = 1 // only possible for degenerate files; any unit vector will do
		return c
	}
	inv := 1 / math.Sqrt(ss)
	for k, x := range mu {
		c[k] = float32(x * inv)
	}
	return c
}

func harmonic(n int) float64 {
	var h float64
	for i := n; i >= 1; i-- { // small terms first, for accuracy
		h += 1 / float64(i)
	}
	return h
}

func hasAlnum(w string) bool {
	for _, r := range w {
		if isWordRune(r) {
			return true
		}
	}
	return false
}

// indexJoiner returns the index of the first character that joins the parts
// of a compound token, or -1.
func indexJoiner(tok []byte) int {
	for i, c := range tok {
		if c == '-' || c == '\'' || c == '.' || c == ',' {
			return i
		}
	}
	return -1
}

// lowerWord normalises a single word the way the tokenizer would.
func lowerWord(w string) string {
	w = strings.TrimSpace(w)
	if isASCIILower(w) {
		return w
	}
	b := make([]byte, 0, len(w))
	for _, r := range w {
		b = appendLower(b, r)
	}
	return string(b)
}

func isASCIILower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}
