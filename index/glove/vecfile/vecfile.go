// Package vecfile reads and writes the compact int8 word-vector file that
// package data embeds. It is separate from package glove so that the converter
// that makes the file does not need the file to build.
package vecfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"unicode/utf8"
)

// The file holds quantised word vectors in a form that can be used straight
// from the bytes (no copy of the rows), so the embedded data costs no heap:
//
//	magic     [8]byte  "GLOVEI8\x00"
//	version   uint32   1
//	dim       uint32   vector length
//	words     uint32   number of rows
//	vocab     uint32   size of the source vocabulary the ranks come from
//	wordBytes uint32   length of the word section
//	word section: per word, uint8 length and the UTF-8 bytes, in frequency order
//	rows: per word, float32 scale then dim int8 values (value = scale * int8)
//	crc       uint32   CRC-32C (Castagnoli) of every byte before it
//
// Integers and floats are little-endian. The source vocabulary size travels
// with the file because the Zipf estimate of a word's probability depends on
// it, not on how many rows were kept.
const (
	magic      = "GLOVEI8\x00"
	version    = 1
	headerSize = len(magic) + 5*4
	crcSize    = 4
	maxDim     = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode writes words and their vectors in the format Parse reads. Each row
// is quantised symmetrically: scale = max|x|/127, value = round(x/scale).
// vocab is the size of the vocabulary the words were ranked in (at least
// len(words)). The output depends only on the arguments.
func Encode(w io.Writer, vocab int, words []string, vectors [][]float32) error {
	if len(words) == 0 || len(words) != len(vectors) {
		return fmt.Errorf("vecfile: encode: %d words and %d vectors", len(words), len(vectors))
	}
	dim := len(vectors[0])
	if dim == 0 || dim > maxDim {
		return fmt.Errorf("vecfile: encode: dimension %d out of range", dim)
	}
	if vocab < len(words) || vocab > math.MaxUint32 || len(words) > math.MaxUint32 {
		return fmt.Errorf("vecfile: encode: vocabulary %d smaller than %d words or too large", vocab, len(words))
	}
	seen := make(map[string]struct{}, len(words))
	wordBytes := 0
	for i, word := range words {
		if len(word) == 0 || len(word) > 255 || !utf8.ValidString(word) {
			return fmt.Errorf("vecfile: encode: word %d %q: empty, longer than 255 bytes or not UTF-8", i, word)
		}
		if _, dup := seen[word]; dup {
			return fmt.Errorf("vecfile: encode: word %q appears twice", word)
		}
		seen[word] = struct{}{}
		if len(vectors[i]) != dim {
			return fmt.Errorf("vecfile: encode: word %q has %d values, want %d", word, len(vectors[i]), dim)
		}
		wordBytes += 1 + len(word)
	}

	h := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<16)
	var hdr [headerSize]byte
	copy(hdr[:], magic)
	le := binary.LittleEndian
	le.PutUint32(hdr[8:], version)
	le.PutUint32(hdr[12:], uint32(dim))
	le.PutUint32(hdr[16:], uint32(len(words)))
	le.PutUint32(hdr[20:], uint32(vocab))
	le.PutUint32(hdr[24:], uint32(wordBytes))
	bw.Write(hdr[:])
	for _, word := range words {
		bw.WriteByte(byte(len(word)))
		bw.WriteString(word)
	}
	row := make([]byte, 4+dim)
	for i, vec := range vectors {
		if err := quantise(row, vec); err != nil {
			return fmt.Errorf("vecfile: encode: word %q: %w", words[i], err)
		}
		bw.Write(row)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("vecfile: encode: %w", err)
	}
	var sum [crcSize]byte
	le.PutUint32(sum[:], h.Sum32())
	if _, err := w.Write(sum[:]); err != nil {
		return fmt.Errorf("vecfile: encode: %w", err)
	}
	return nil
}

// quantise writes one row: the float32 scale, then the int8 values.
func quantise(row []byte, vec []float32) error {
	var maxAbs float64
	for _, x := range vec {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("value is not finite")
		}
		maxAbs = max(maxAbs, math.Abs(f))
	}
	scale := float32(maxAbs / 127)
	binary.LittleEndian.PutUint32(row, math.Float32bits(scale))
	for k, x := range vec {
		q := 0.0
		if scale > 0 {
			q = math.Round(float64(x) / float64(scale))
		}
		row[4+k] = byte(int8(min(127, max(-127, q))))
	}
	return nil
}

// File is a parsed vector file. Its rows are read from the bytes given to
// Parse, which must not change afterwards.
type File struct {
	Dim   int
	Vocab int              // size of the source vocabulary the ranks come from
	Words []string         // in frequency order: index = rank - 1
	Index map[string]int32 // word -> row
	Scale []float32        // per row: value = Scale[i] * int8
	CRC   uint32           // CRC-32C of the file, which identifies its contents

	b        []byte
	rowStart int
}

// Row returns row i's int8 values, as bytes.
func (f *File) Row(i int) []byte {
	off := f.rowStart + i*(4+f.Dim) + 4
	return f.b[off : off+f.Dim : off+f.Dim]
}

// Parse validates b (header, exact length, checksum, words) and returns the
// file it holds. Rows are not copied.
func Parse(b []byte) (*File, error) {
	if len(b) < headerSize {
		return nil, fmt.Errorf("vecfile: truncated file: %d bytes, the header alone is %d", len(b), headerSize)
	}
	if string(b[:len(magic)]) != magic {
		return nil, errors.New("vecfile: not a GloVe int8 vector file (bad magic)")
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[8:]); v != version {
		return nil, fmt.Errorf("vecfile: file version %d, this build reads version %d", v, version)
	}
	f := &File{
		Dim:   int(le.Uint32(b[12:])),
		Vocab: int(le.Uint32(b[20:])),
		b:     b,
	}
	n := int(le.Uint32(b[16:]))
	wordBytes := int(le.Uint32(b[24:]))
	if f.Dim == 0 || f.Dim > maxDim {
		return nil, fmt.Errorf("vecfile: dimension %d out of range", f.Dim)
	}
	if n == 0 || f.Vocab < n {
		return nil, fmt.Errorf("vecfile: %d words from a vocabulary of %d", n, f.Vocab)
	}
	if wordBytes < 2*n || wordBytes > 256*n {
		return nil, fmt.Errorf("vecfile: word section of %d bytes cannot hold %d words", wordBytes, n)
	}
	f.rowStart = headerSize + wordBytes
	want := int64(f.rowStart) + int64(n)*int64(4+f.Dim) + crcSize
	if int64(len(b)) < want {
		return nil, fmt.Errorf("vecfile: truncated file: %d bytes, the header promises %d", len(b), want)
	}
	if int64(len(b)) > want {
		return nil, fmt.Errorf("vecfile: %d bytes of trailing data after the %d the header promises", int64(len(b))-want, want)
	}
	body := b[:len(b)-crcSize]
	f.CRC = crc32.Checksum(body, castagnoli)
	if got := le.Uint32(b[len(body):]); got != f.CRC {
		return nil, fmt.Errorf("vecfile: corrupt file: checksum %08x, the file says %08x", f.CRC, got)
	}
	if err := f.parseWords(b[headerSize:f.rowStart], n); err != nil {
		return nil, err
	}
	if err := f.parseScales(n); err != nil {
		return nil, err
	}
	return f, nil
}

// parseWords splits the word section into strings that share one backing
// copy, so loading 100k words costs one allocation instead of 100k.
func (f *File) parseWords(sec []byte, n int) error {
	all := string(sec)
	f.Words = make([]string, 0, n)
	f.Index = make(map[string]int32, n)
	for off := 0; off < len(all); {
		l := int(sec[off])
		off++
		if l == 0 || off+l > len(all) {
			return fmt.Errorf("vecfile: corrupt word section at byte %d", headerSize+off-1)
		}
		word := all[off : off+l]
		off += l
		if !utf8.ValidString(word) {
			return fmt.Errorf("vecfile: word %d is not UTF-8", len(f.Words))
		}
		if len(f.Words) == n {
			return fmt.Errorf("vecfile: word section holds more than %d words", n)
		}
		f.Index[word] = int32(len(f.Words))
		f.Words = append(f.Words, word)
		if len(f.Index) != len(f.Words) {
			return fmt.Errorf("vecfile: word %q appears twice", word)
		}
	}
	if len(f.Words) != n {
		return fmt.Errorf("vecfile: word section holds %d words, the header says %d", len(f.Words), n)
	}
	return nil
}

// parseScales reads every row's scale and checks it is usable.
func (f *File) parseScales(n int) error {
	f.Scale = make([]float32, n)
	for i := range f.Scale {
		s := math.Float32frombits(binary.LittleEndian.Uint32(f.b[f.rowStart+i*(4+f.Dim):]))
		if !(s >= 0) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("vecfile: row %d has scale %v", i, s)
		}
		f.Scale[i] = s
	}
	return nil
}
