// Package tokenizer counts tokens exactly with tiktoken-go, offline.
package tokenizer

import (
	"fmt"
	"sync"

	"github.com/ctxd/ctxd/memory"
	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// The BPE ranks come from the loader package's embedded files: tiktoken-go's
// default loader downloads them on first use, with no timeout.
func init() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) }

// Tokenizer counts tokens in the encodings memory.ValidEncoding accepts. It
// builds each encoding once per process (GetEncoding takes 60-250 ms) and is
// safe for concurrent use.
type Tokenizer struct {
	mu    sync.Mutex
	encs  map[string]*tiktoken.Tiktoken
	heaps map[string]*heapBPE // for text with long runs; see longpiece.go
}

// New returns a Tokenizer; encodings are built on first use.
func New() *Tokenizer {
	return &Tokenizer{encs: map[string]*tiktoken.Tiktoken{}, heaps: map[string]*heapBPE{}}
}

var _ memory.Tokenizer = (*Tokenizer)(nil)

// Count returns the exact number of tokens of text in encoding.
// EncodeOrdinary treats special-token text ("<|endoftext|>") as plain text:
// stored content is untrusted, and Encode panics on it.
func (t *Tokenizer) Count(encoding, text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	enc, err := t.encoding(encoding)
	if err != nil {
		return 0, err
	}
	if hasLongRun(text) {
		h, err := t.heap(encoding)
		if err != nil {
			return 0, err
		}
		return h.count(text)
	}
	return len(enc.EncodeOrdinary(text)), nil
}

// heap returns the heap-merge counter of an encoding, built on first use
// (its ranks are a second copy: only texts with long runs pay for them).
func (t *Tokenizer) heap(encoding string) (*heapBPE, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.heaps[encoding]; ok {
		return h, nil
	}
	h, err := newHeapBPE(encoding)
	if err != nil {
		return nil, err
	}
	t.heaps[encoding] = h
	return h, nil
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

func (t *Tokenizer) encoding(name string) (*tiktoken.Tiktoken, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if enc, ok := t.encs[name]; ok {
		return enc, nil
	}
	if !memory.ValidEncoding(name) {
		return nil, memory.Errorf(memory.EINVALID, "encoding %q is not one of o200k_base, cl100k_base", name)
	}
	enc, err := tiktoken.GetEncoding(name)
	if err != nil {
		return nil, fmt.Errorf("load encoding %s: %w", name, err)
	}
	t.encs[name] = enc
	return enc, nil
}
