package boltstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"

	"github.com/ctxd/ctxd/memory"
)

// A message record is its JSON, compressed, with the cold prompt kept apart,
// under a checksum:
//
//	recordV2, flags, crc, [prompt ref: 8 bytes if flagPromptApart], body
//
// crc is the CRC-32C (Castagnoli), big-endian, of everything after it with
// the flags byte in front: one changed byte of a record on disk (a bad
// sector, a stray write) otherwise decompresses and decodes into a message
// that is served as is, and `verify` could not tell. CRC-32C catches every
// burst of up to 32 bits and is hardware-assisted (SSE4.2, ARMv8), so it
// costs well under a microsecond per record. Records of the format before
// (recordV1: the same without crc) read as before, unchecked, and are
// rewritten with a checksum when the message next changes.
//
// body is the JSON of the message, zstd-compressed if flagZstd. Records
// written before this format are the bare JSON: they start with '{', never
// with recordV1, and read as before; they are rewritten in the new format
// when the message next changes.
//
// Replaying 10 recorded coding-agent runs (1.41 MB of content) left 4.67 MB
// of message records: 1.87 MB of content (JSON-escaped, with summaries),
// 1.74 MB of cold.prompt_at_drop (up to 2,000 characters, the same for every
// message one compaction moved: 24 distinct prompts in 1,432 cold
// messages) and 1.05 MB of other fields.
//
//   - The prompt is stored once per session and text in the prompts bucket,
//     with a count of the records that name it (promptAcquire,
//     promptRelease): 1.74 MB -> 17 kB.
//   - zstd over the JSON: 2.95 -> 1.39 MB for the same records without
//     their prompt. Against snappy (also in go.sum, through Bleve), on the
//     replay's records 2.16x against 1.63x; on the synthetic records of
//     BenchmarkRecordCodec 3.04x against 2.36x, decoding in about the same
//     CPU time (+8 us on JSON's 24 us per 2 kB record, either codec) but
//     encoding slower (27 us against 6): a record is written once per
//     change and read many times, and a context call reads its window
//     through the decode cache, which compares the stored bytes and so
//     decodes only what changed.
const (
	recordV1 = 0x01
	recordV2 = 0x02

	flagZstd        = 1 << 0
	flagPromptApart = 1 << 1
)

// promptRefLen is the length of a prompt's reference: the first 8 bytes of
// its SHA-256, within its session. promptAcquire compares the text before
// it shares a stored prompt, so a collision stores the prompt inline.
const promptRefLen = 8

// minPromptApart is the shortest prompt kept apart: a shorter one costs
// about as much inline as its reference and a lookup.
const minPromptApart = 64

// maxRecordBytes bounds what a record may decompress to: content is at most
// 1 MiB (memory.DefaultLimits), metadata 16 kB, and tool calls come with
// the content's text. A record claiming more is damaged.
const maxRecordBytes = 64 << 20

var bucketPrompts = []byte("prompts")

var (
	// SpeedDefault rather than SpeedFastest: 3.04x against 2.81x, in
	// about the same CPU time (BenchmarkRecordCodec).
	zenc = must(zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithLowerEncoderMem(true)))
	zdec = must(zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRecordBytes)))
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// compress returns b zstd-compressed and true, or b itself and false when
// compressing does not make it smaller.
func compress(b []byte) ([]byte, bool) {
	if z := zenc.EncodeAll(b, make([]byte, 0, len(b)/2)); len(z) < len(b) {
		return z, true
	}
	return b, false
}

// unpack reads a body that flags says is zstd-compressed, or not.
func unpack(flags byte, body []byte) ([]byte, error) {
	if flags&flagZstd == 0 {
		return body, nil
	}
	return zdec.DecodeAll(body, nil)
}

// encodeRecord encodes m as a record; ref, if not nil, is the reference of
// its cold prompt, which the record leaves out.
func encodeRecord(m *memory.Message, ref []byte) ([]byte, error) {
	v := m
	var flags byte
	if ref != nil {
		c, cold := *m, *m.Cold
		cold.PromptAtDrop = ""
		c.Cold = &cold
		v, flags = &c, flagPromptApart
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode message %s: %w", m.ID, err)
	}
	body, z := compress(b)
	if z {
		flags |= flagZstd
	}
	out := make([]byte, 0, 2+crcLen+len(ref)+len(body))
	out = append(out, recordV2, flags, 0, 0, 0, 0)
	out = append(out, ref...)
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[2:], recordCRC(flags, out[2+crcLen:]))
	return out, nil
}

const crcLen = 4

// v1Compatible are the options under which the v2 decoder reads what
// encoding/json wrote as encoding/json reads it back: names matched
// without regard to case, the last of duplicate names winning, invalid
// UTF-8 taken as it is.
var v1Compatible = jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(true),
	jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// unmarshalJSON decodes a stored record's JSON into v. Records are written
// by encoding/json and read on every context call (a window's worth) and
// search (its hits): the v2 decoder reads them in less than half the CPU
// (6.5 against 14.6 us per message of BenchmarkRecordCodec's corpus). Should
// it refuse something encoding/json accepts, encoding/json decides, so a
// record reads as it always did.
func unmarshalJSON(js []byte, v any) error {
	if jsonv2.Unmarshal(js, v, v1Compatible) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero() // what the v2 decoder filled before it stopped
	return json.Unmarshal(js, v)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordCRC is the checksum of a record's flags and what follows its crc.
func recordCRC(flags byte, rest []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, []byte{flags}), castagnoli, rest)
}

// errChecksum marks a record whose bytes are not those written.
var errChecksum = errors.New("checksum mismatch")

// recordParts splits a record into its flags, prompt reference and body,
// checking its checksum. A record of the old format (bare JSON) has flags 0
// and no reference.
func recordParts(b []byte) (flags byte, ref, body []byte, err error) {
	return splitRecord(b, true)
}

// recordRef is the prompt reference of a record, its checksum unchecked:
// counting prompts needs only that, and a damaged record is reported by
// what reads it, once.
func recordRef(b []byte) ([]byte, error) {
	_, ref, _, err := splitRecord(b, false)
	return ref, err
}

func splitRecord(b []byte, verify bool) (flags byte, ref, body []byte, err error) {
	if len(b) > 0 && b[0] == '{' {
		return 0, nil, b, nil
	}
	if len(b) < 2 || (b[0] != recordV1 && b[0] != recordV2) {
		return 0, nil, nil, errors.New("unknown record format")
	}
	flags, body = b[1], b[2:]
	if b[0] == recordV2 {
		if len(body) < crcLen {
			return 0, nil, nil, errors.New("record cut short")
		}
		sum, rest := binary.BigEndian.Uint32(body), body[crcLen:]
		if verify && recordCRC(flags, rest) != sum {
			return 0, nil, nil, errChecksum
		}
		body = rest
	}
	if flags&^(flagZstd|flagPromptApart) != 0 {
		return 0, nil, nil, fmt.Errorf("unknown record flags %#x", flags)
	}
	if flags&flagPromptApart != 0 {
		if len(body) < promptRefLen {
			return 0, nil, nil, errors.New("record cut short")
		}
		ref, body = body[:promptRefLen], body[promptRefLen:]
	}
	return flags, ref, body, nil
}

// decodeMessage decodes the message record b stored at key in tx (which
// holds its prompt, if it is kept apart). A record that does not check or
// decode is a *memory.DamagedRecord naming where it is.
func decodeMessage(tx *bolt.Tx, key, b []byte) (*memory.Message, error) {
	m, err := decodeRecord(tx, b)
	if err != nil {
		return nil, damaged(key, err)
	}
	return m, nil
}

// damaged describes the damaged record at a messages key (tenant \x00
// session \x00 seq).
func damaged(key []byte, err error) *memory.DamagedRecord {
	d := &memory.DamagedRecord{Err: err}
	if len(key) > 8 {
		if parts := bytes.SplitN(key[:len(key)-9], []byte{0}, 2); len(parts) == 2 && key[len(key)-9] == 0 {
			d.Tenant, d.SessionID = string(parts[0]), string(parts[1])
			d.Seq = binary.BigEndian.Uint64(key[len(key)-8:])
		}
	}
	return d
}

// withID names the message a damaged record was read for.
func withID(err error, id string) error {
	var d *memory.DamagedRecord
	if errors.As(err, &d) {
		d.MessageID = id
	}
	return err
}

func decodeRecord(tx *bolt.Tx, b []byte) (*memory.Message, error) {
	flags, ref, body, err := recordParts(b)
	if err != nil {
		return nil, err
	}
	js, err := unpack(flags, body)
	if err != nil {
		return nil, err
	}
	var m memory.Message
	if err := unmarshalJSON(js, &m); err != nil {
		return nil, err
	}
	if ref == nil {
		return &m, nil
	}
	if m.Cold == nil {
		return nil, fmt.Errorf("decode message %s: a prompt reference without cold info", m.ID)
	}
	p, err := readPrompt(tx, m.Tenant, m.SessionID, ref)
	if err != nil {
		return nil, fmt.Errorf("decode message %s: %w", m.ID, err)
	}
	m.Cold.PromptAtDrop = p
	return &m, nil
}

// promptKey is where a session's prompt with reference ref is kept: under
// the session's message prefix, so DeleteSession deletes them by prefix.
func promptKey(tenant, session string, ref []byte) []byte {
	return append(messagePrefix(tenant, session), ref...)
}

func promptRef(p string) []byte {
	h := sha256.Sum256([]byte(p))
	return h[:promptRefLen]
}

// A prompts entry is the number of records that name it (uvarint), a flags
// byte (flagZstd or 0), then the prompt.
func readPrompt(tx *bolt.Tx, tenant, session string, ref []byte) (string, error) {
	v := tx.Bucket(bucketPrompts).Get(promptKey(tenant, session, ref))
	if v == nil {
		return "", fmt.Errorf("prompt %x is missing", ref)
	}
	_, packed, err := splitPromptEntry(v)
	if err != nil {
		return "", err
	}
	p, err := unpack(packed[0], packed[1:])
	return string(p), err
}

// splitPromptEntry returns an entry's count and the rest: flags and prompt.
func splitPromptEntry(v []byte) (refs uint64, packed []byte, err error) {
	refs, n := binary.Uvarint(v)
	if n <= 0 || len(v) < n+1 || v[n]&^flagZstd != 0 {
		return 0, nil, errors.New("prompt entry is damaged")
	}
	return refs, v[n:], nil
}

func promptEntry(refs uint64, packed []byte) []byte {
	return append(binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(packed)), refs), packed...)
}

// promptAcquire counts one more record naming m's cold prompt and returns
// its reference, or nil when the record keeps it inline: no prompt, a short
// one, or (never seen; a SHA-256 prefix) another text under the same
// reference.
func promptAcquire(tx *bolt.Tx, m *memory.Message) ([]byte, error) {
	if m.Cold == nil || len(m.Cold.PromptAtDrop) < minPromptApart {
		return nil, nil
	}
	p := m.Cold.PromptAtDrop
	ref := promptRef(p)
	b := tx.Bucket(bucketPrompts)
	key := promptKey(m.Tenant, m.SessionID, ref)
	var entry []byte
	if v := b.Get(key); v != nil {
		refs, packed, err := splitPromptEntry(v)
		if err != nil {
			return nil, fmt.Errorf("prompt of message %s: %w", m.ID, err)
		}
		stored, err := unpack(packed[0], packed[1:])
		if err != nil {
			return nil, fmt.Errorf("prompt of message %s: %w", m.ID, err)
		}
		if string(stored) != p {
			return nil, nil
		}
		entry = promptEntry(refs+1, packed)
	} else {
		body, z := compress([]byte(p))
		var flags byte
		if z {
			flags = flagZstd
		}
		entry = promptEntry(1, append([]byte{flags}, body...))
	}
	if err := b.Put(key, entry); err != nil {
		return nil, fmt.Errorf("put prompt of message %s: %w", m.ID, err)
	}
	return ref, nil
}

// promptRelease counts one record fewer naming the prompt of the record
// raw (if it names one) and deletes the prompt when none is left.
func promptRelease(tx *bolt.Tx, tenant, session string, raw []byte) error {
	ref, err := recordRef(raw)
	if err != nil || ref == nil {
		return err
	}
	b := tx.Bucket(bucketPrompts)
	key := promptKey(tenant, session, ref)
	v := b.Get(key)
	if v == nil {
		return fmt.Errorf("release prompt %x of %s: missing", ref, session)
	}
	refs, packed, err := splitPromptEntry(v)
	if err != nil {
		return fmt.Errorf("release prompt %x of %s: %w", ref, session, err)
	}
	if refs <= 1 {
		return b.Delete(key)
	}
	return b.Put(key, promptEntry(refs-1, packed))
}

// checkPrompts compares the prompts bucket with the references the message
// records hold.
func checkPrompts(tx *bolt.Tx) error {
	named := map[string]uint64{}
	err := tx.Bucket(bucketMessages).ForEach(func(k, v []byte) error {
		ref, err := recordRef(v)
		if err != nil {
			return fmt.Errorf("message record %x: %w", k, err)
		}
		if ref != nil && len(k) >= 8 {
			named[string(k[:len(k)-8])+string(ref)]++ // the session's prefix, then the ref
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = tx.Bucket(bucketPrompts).ForEach(func(k, v []byte) error {
		refs, _, err := splitPromptEntry(v)
		if err != nil {
			return fmt.Errorf("prompt %x: %w", k, err)
		}
		if refs != named[string(k)] {
			return fmt.Errorf("prompt %x counts %d records, %d name it", k, refs, named[string(k)])
		}
		delete(named, string(k))
		return nil
	})
	if err != nil {
		return err
	}
	for k := range named {
		return fmt.Errorf("records name prompt %x, which is missing", k)
	}
	return nil
}
