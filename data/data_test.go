package data_test

import (
	"testing"

	"github.com/ctxd/ctxd/data"
	"github.com/ctxd/ctxd/index/glove/vecfile"
)

func TestGloVe(t *testing.T) {
	// The file is committed: keep it small enough not to bloat the repository.
	if n := len(data.GloVe); n > 12<<20 {
		t.Errorf("glove-100d.i8 is %d bytes, over the 12 MiB budget", n)
	}
	f, err := vecfile.Parse(data.GloVe)
	if err != nil {
		t.Fatal(err)
	}
	if f.Dim != 100 || len(f.Words) != 100000 || f.Vocab != 341479 || f.Words[0] != "the" {
		t.Errorf("dim %d, %d words of %d, first %q", f.Dim, len(f.Words), f.Vocab, f.Words[0])
	}
}
