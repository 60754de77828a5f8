// Package tokenizer counts tokens exactly as OpenAI's tiktoken does,
// offline: the ranks embedded in tiktoken-go-loader, tiktoken-go's split and
// merge rules (split.go, bpe.go), checked against tiktoken-go itself.
package tokenizer

import (
	"sync"
	"unicode/utf8"

	"github.com/ctxd/ctxd/memory"
	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// The BPE ranks come from the loader package's embedded files: tiktoken-go's
// default loader downloads them on first use, with no timeout.
func init() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) }

// Tokenizer counts tokens in the encodings memory.ValidEncoding accepts. It
// builds each encoding once per process and is safe for concurrent use.
type Tokenizer struct {
	mu   sync.Mutex
	encs map[string]*bpe
}

// New returns a Tokenizer; encodings are built on first use.
func New() *Tokenizer {
	return &Tokenizer{encs: map[string]*bpe{}}
}

var _ memory.Tokenizer = (*Tokenizer)(nil)

// Count returns the exact number of tokens of text in encoding, as
// tiktoken's EncodeOrdinary counts them: text that reads like a special
// token ("<|endoftext|>") is plain text, since stored content is untrusted.
func (t *Tokenizer) Count(encoding, text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	enc, err := t.encoding(encoding)
	if err != nil {
		return 0, err
	}
	if !utf8.ValidString(text) {
		// tiktoken reads text as runes, each invalid byte becoming U+FFFD.
		text = string([]rune(text))
	}
	return enc.count(text), nil
}

// Warm builds the named encodings now, so the first request does not pay for it.
func (t *Tokenizer) Warm(encodings ...string) error {
	for _, e := range encodings {
		if _, err := t.encoding(e); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tokenizer) encoding(name string) (*bpe, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if enc, ok := t.encs[name]; ok {
		return enc, nil
	}
	if !memory.ValidEncoding(name) {
		return nil, memory.Errorf(memory.EINVALID, "encoding %q is not one of o200k_base, cl100k_base", name)
	}
	enc, err := newBPE(name)
	if err != nil {
		return nil, err
	}
	t.encs[name] = enc
	return enc, nil
}
