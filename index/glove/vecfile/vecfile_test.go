package vecfile

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"slices"
	"strings"
	"testing"
)

var (
	testWords = []string{"the", ",", "cat", "straße"}
	testVecs  = [][]float32{
		{0.5, -1, 0.25},
		{0, 0, 0},
		{3, 2.5, -0.001},
		{-0.7, 0.7, 0.1},
	}
)

func encode(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, 10, testWords, testVecs); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fixCRC rewrites the checksum, so a test can reach the checks behind it.
func fixCRC(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[len(b)-crcSize:], crc32.Checksum(b[:len(b)-crcSize], castagnoli))
	return b
}

func TestRoundTrip(t *testing.T) {
	b := encode(t)
	if again := encode(t); !bytes.Equal(b, again) {
		t.Fatal("encoding is not deterministic")
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Dim != 3 || f.Vocab != 10 || !slices.Equal(f.Words, testWords) {
		t.Fatalf("got dim %d vocab %d words %q", f.Dim, f.Vocab, f.Words)
	}
	for i, vec := range testVecs {
		if f.Index[testWords[i]] != int32(i) {
			t.Errorf("Index[%q] = %d", testWords[i], f.Index[testWords[i]])
		}
		row := f.Row(i)
		for k, x := range vec {
			got := f.Scale[i] * float32(int8(row[k]))
			// Rounding to the nearest step errs by at most half a step.
			if d := math.Abs(float64(got - x)); d > float64(f.Scale[i])/2+1e-7 {
				t.Errorf("word %q value %d: %v, want %v", testWords[i], k, got, x)
			}
		}
	}
	// The largest magnitude of a row maps to ±127 exactly.
	if r := f.Row(2); int8(r[0]) != 127 {
		t.Errorf("max value quantised to %d", int8(r[0]))
	}
}

func TestParseErrors(t *testing.T) {
	good := encode(t)
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	put := func(off int, v uint32) []byte {
		return mod(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return fixCRC(b) })
	}
	cases := []struct {
		name, want string
		b          []byte
	}{
		{"empty", "truncated", nil},
		{"short header", "truncated", good[:10]},
		{"truncated rows", "truncated", good[:len(good)-5]},
		{"trailing", "trailing", append(bytes.Clone(good), 1, 2)},
		{"magic", "bad magic", mod(func(b []byte) []byte { b[1] = 'x'; return b })},
		{"version", "version 2", put(8, 2)},
		{"dim", "dimension 0", put(12, 0)},
		{"no words", "0 words", put(16, 0)},
		{"vocab", "vocabulary of 2", put(20, 2)},
		{"word bytes", "cannot hold", put(24, 1)},
		{"checksum", "checksum", mod(func(b []byte) []byte { b[len(b)-10] ^= 0x40; return b })},
		{"word length", "corrupt word section", mod(func(b []byte) []byte { b[headerSize] = 0; return fixCRC(b) })},
		{"duplicate", "twice", mod(func(b []byte) []byte { copy(b[headerSize+7:], "the"); return fixCRC(b) })},
		{"utf8", "not UTF-8", mod(func(b []byte) []byte { b[headerSize+1] = 0xff; return fixCRC(b) })},
		{"scale", "scale", mod(func(b []byte) []byte {
			f, _ := Parse(good)
			binary.LittleEndian.PutUint32(b[f.rowStart:], math.Float32bits(float32(math.NaN())))
			return fixCRC(b)
		})},
	}
	for _, c := range cases {
		_, err := Parse(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name  string
		vocab int
		words []string
		vecs  [][]float32
	}{
		{"none", 1, nil, nil},
		{"count mismatch", 5, []string{"a"}, [][]float32{{1}, {2}}},
		{"vocab too small", 1, []string{"a", "b"}, [][]float32{{1}, {2}}},
		{"empty word", 5, []string{""}, [][]float32{{1}}},
		{"long word", 5, []string{strings.Repeat("x", 256)}, [][]float32{{1}}},
		{"duplicate", 5, []string{"a", "a"}, [][]float32{{1}, {2}}},
		{"ragged", 5, []string{"a", "b"}, [][]float32{{1, 2}, {2}}},
		{"nan", 5, []string{"a"}, [][]float32{{nan}}},
	}
	for _, c := range cases {
		if err := Encode(&bytes.Buffer{}, c.vocab, c.words, c.vecs); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
