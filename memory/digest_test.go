package memory_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/tokenizer"
)

// The digest's count is added up from its lines' cached counts: it must
// equal a count of the whole text, in every encoding, for lines that end in
// punctuation, start with '/', hold digits, CJK or emoji.
func TestDigestCostIsExact(t *testing.T) {
	t.Parallel()
	tok := tokenizer.New()
	pool := []string{
		"/usr/lib/python3.11/site-packages/foo/bar.py:12: in test_parse_config",
		"src/app/handlers/user_handler.go:88:\treturn nil, fmt.Errorf(\"load %s: %w\", path, err)",
		"def parse_config(path):",
		"    raise ValueError('bad')",
		"})",
		"} else {",
		"/",
		"//go:build linux",
		"/* a comment */",
		"123456789 items in queue_length",
		"données_utilisateur = charger_fichier('été.json')",
		"配置文件 config_loader.py 已加载",
		"🙂 emoji_marker done.",
		"[lines from: bash grep -rn \"parse_config\" src/]",
		"a",
		"'s",
		"?!",
		"x = y // integer_division",
		"\"quoted_name\":",
		"C:\\Users\\me\\project_dir\\main.go",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		for trial := range 300 {
			n := 1 + rng.IntN(12)
			lines, cached := make([]string, n), make([]bool, n)
			for i := range n {
				lines[i], cached[i] = pool[rng.IntN(len(pool))], rng.IntN(2) == 0
			}
			whole := strings.Join(lines, "\n")
			got, err := memory.DigestCostOf(tok, enc, lines, cached)
			if err != nil {
				t.Fatal(err)
			}
			want, err := tok.Count(enc, whole)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%s trial %d: digestCost %d, whole count %d, text %q", enc, trial, got, want, whole)
			}
		}
	}
}
