package tokenizer

import (
	"fmt"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// specs are tiktoken-go's split patterns and rank files for the encodings
// ctxd offers (tiktoken-go v0.1.8, encoding.go). split.go follows the
// patterns; they are kept here for the check against tiktoken-go.
var specs = map[string]struct{ url, pattern string }{
	"o200k_base": {"https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|` +
			`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|` +
			`\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"cl100k_base": {"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
		`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
}

// newBPE loads an encoding's ranks (embedded in tiktoken-go-loader: no
// network) and checks the counter against tiktoken-go on texts that take
// every branch of the split, so that a Go release whose Unicode tables
// moved a character, or a change here, fails at start-up rather than
// miscounting budgets.
func newBPE(encoding string) (*bpe, error) {
	spec, ok := specs[encoding]
	split, ok2 := splitters[encoding]
	if !ok || !ok2 {
		return nil, fmt.Errorf("no split for encoding %s", encoding)
	}
	ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(spec.url)
	if err != nil {
		return nil, fmt.Errorf("load ranks of %s: %w", encoding, err)
	}
	b := &bpe{ranks: ranks, split: split, merged: newPieceCache()}
	if err := check(encoding, b); err != nil {
		return nil, err
	}
	return b, nil
}

// check compares b's counts with tiktoken-go's on selfCheck.
func check(encoding string, b *bpe) error {
	ref, err := reference(encoding, b.ranks)
	if err != nil {
		return err
	}
	for _, text := range selfCheck {
		if got, want := b.count(text), len(ref.EncodeOrdinary(text)); got != want {
			return fmt.Errorf("token counter for %s disagrees with tiktoken-go on %q: %d tokens, want %d",
				encoding, text, got, want)
		}
	}
	return nil
}

// reference is tiktoken-go's encoder for the same ranks (shared, not copied).
func reference(encoding string, ranks map[string]int) (*tiktoken.Tiktoken, error) {
	spec := specs[encoding]
	core, err := tiktoken.NewCoreBPE(ranks, map[string]int{}, spec.pattern)
	if err != nil {
		return nil, fmt.Errorf("build tiktoken-go %s: %w", encoding, err)
	}
	return tiktoken.NewTiktoken(core, &tiktoken.Encoding{Name: encoding, PatStr: spec.pattern, MergeableRanks: ranks}, nil), nil
}

// selfCheck takes every alternative of both patterns: contractions in both
// cases, letters after a prefix character, upper then lower and the reverse,
// marks, titlecase and modifier letters, scripts without case, digit runs,
// punctuation with and without a space, slashes and line ends after it,
// blank runs before text, before line ends and at the end.
var selfCheck = []string{
	"Hello, World! It's 2026; we'RE done, they'll see. DON'T 'LL 'd",
	"ÉCOLE été ǅungla ﬁne ʰello Σίσυφος ΣΊΣΥΦΟΣ 日本語のテキスト 한국어 עברית العربية",
	"e\u0301 \u0301x A\u0301B x\u0301Y ab\u0903cd",
	"1234567 ٣٤٥ Ⅻ ½ 3.14159 +42 -7",
	"path/to/file.go:12 !!!\n\n/x ?? \r\n/ ... -- ->",
	"  leading\n\n   \n\ttabs\t\t\n  trailing   ",
	"a  b   c\u00a0\u2003d \u3000e\r\r\n",
	"<|endoftext|> 😀👍🏽 \U0001F468\u200d\U0001F469 ",
	"   ",
}
