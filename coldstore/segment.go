package coldstore

import (
	"bytes"
	"errors"
	"io"

	"github.com/klauspost/compress/gzip"
)

// A session's file is a gzip stream of one or more members ("segments"):
// each Append writes its lines as one new member, and a compaction of the
// file (compact.go) or a Rewrite writes all of them as one. Concatenated
// members are one valid gzip file, so zcat, zgrep and `gzip -t` read it as
// the JSONL it holds. Each member carries the CRC-32 and length of its
// text, so a damaged segment is found, said (DamageError.BadSegments) and
// its lines rebuilt from the store by verify --repair or start-up's
// reconciliation, while the segments around it still read.
//
// Compressed, the mirror of 12 replayed coding-agent runs took 0.3 MB
// where the JSONL took 1.75 MB.

// segment is one member that read back whole: where it ends in the file
// and the text it holds.
type segment struct {
	end  int
	text []byte
}

// scanned is what scanSegments makes of a file.
type scanned struct {
	segs []segment
	// torn is the length of a last member cut short (an Append a crash
	// interrupted: never acknowledged), 0 if none.
	torn int
	// bad counts the byte runs that are no member or fail their checksum,
	// and badBytes their total length.
	bad, badBytes int
}

// gzipMagic starts every member (ID1, ID2 and the deflate method).
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// scanSegments reads data as a sequence of gzip members. After a damaged
// run it resumes at the next offset where a member reads back whole, so
// one flipped byte costs only its own segment's lines.
func scanSegments(data []byte) scanned {
	var out scanned
	for off := 0; off < len(data); {
		text, n, err := readSegment(data[off:])
		if err == nil {
			off += n
			out.segs = append(out.segs, segment{end: off, text: text})
			continue
		}
		next := nextSegment(data, off+1)
		if next < 0 && errors.Is(err, io.ErrUnexpectedEOF) && startsMember(data[off:]) {
			out.torn = len(data) - off
			break
		}
		if next < 0 {
			next = len(data)
		}
		out.bad++
		out.badBytes += next - off
		off = next
	}
	return out
}

// startsMember says whether b starts as a member does (a cut may leave
// fewer bytes than the magic).
func startsMember(b []byte) bool {
	return bytes.HasPrefix(b, gzipMagic) || len(b) < len(gzipMagic) && bytes.HasPrefix(gzipMagic, b)
}

// nextSegment is the first offset from 'from' where a whole member reads
// back, -1 if none.
func nextSegment(data []byte, from int) int {
	for from < len(data) {
		i := bytes.Index(data[from:], gzipMagic)
		if i < 0 {
			return -1
		}
		if _, _, err := readSegment(data[from+i:]); err == nil {
			return from + i
		}
		from += i + 1
	}
	return -1
}

// readSegment decompresses the member data starts with and says how many
// bytes it took. A member cut short is io.ErrUnexpectedEOF.
func readSegment(data []byte) ([]byte, int, error) {
	// A bytes.Reader is an io.ByteReader, so the decompressor reads
	// exactly the member's bytes and Len tells where it ended.
	r := bytes.NewReader(data)
	z, err := gzip.NewReader(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, err
	}
	z.Multistream(false)
	text, err := io.ReadAll(z)
	if err != nil {
		return nil, 0, err
	}
	return text, len(data) - r.Len(), nil
}

// compressSegment makes one member of text.
func compressSegment(text []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(text)/4 + 64)
	z, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := z.Write(text); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
