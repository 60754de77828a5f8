// Package boltstore is the system of record: memory.Store on bbolt.
//
// Layout (all keys byte strings, numbers big-endian so keys sort in order):
//
//	sessions  tenant \x00 session            -> JSON memory.Session
//	messages  tenant \x00 session \x00 seq   -> memory.Message (no vector): record.go
//	prompts   tenant \x00 session \x00 ref   -> a cold prompt records share: record.go
//	ids       message id                     -> its key in messages
//	vectors   message id                     -> float32 little-endian
//	states    tenant \x00 session \x00 state seq -> nothing (messages by state)
//	changes   store seq                      -> JSON memory.Change
//	meta      name                           -> value
//	clientids tenant \x00 session \x00 client id -> message id (message_id)
//	writekeys tenant \x00 session \x00 'k' key -> JSON memory.WriteRecord
//	          tenant \x00 session \x00 't' time key -> nothing (records by age)
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

var (
	bucketSessions = []byte("sessions")
	bucketMessages = []byte("messages")
	bucketIDs      = []byte("ids")
	bucketVectors  = []byte("vectors")
	bucketChanges  = []byte("changes")
	bucketMeta     = []byte("meta")
	bucketStates   = []byte("states")
	bucketClient   = []byte("clientids")
	bucketWrites   = []byte("writekeys")
	allBuckets     = [][]byte{bucketSessions, bucketMessages, bucketIDs, bucketVectors, bucketChanges, bucketMeta, bucketStates,
		bucketPrompts, bucketClient, bucketWrites}
)

// DefaultLockTimeout is how long Open waits for another process's file lock.
const DefaultLockTimeout = time.Second

// Store is a memory.Store backed by one bbolt file.
type Store struct {
	db   *bolt.DB
	path string
	// reserve is the free disk space below which Append refuses; see
	// ReserveDisk.
	reserve atomic.Int64
	// spare is the size of the file a delete frees on a full disk; see
	// KeepSpare.
	spare   atomic.Int64
	decoded *decodeCache // read transactions' message records
}

var _ memory.Store = (*Store)(nil)

// Open opens (or creates) the store file at path. bbolt locks the file, so a
// second process gets a clear error instead of a corrupt file.
func Open(path string, readOnly bool) (*Store, error) {
	if !readOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("create data dir %s: %w", filepath.Dir(path), err)
		}
	}
	if err := checkNotTruncated(path); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         DefaultLockTimeout,
		ReadOnly:        readOnly,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 64 << 20,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, memory.Errorf(memory.EUNAVAILABLE, "data dir %s is in use (is a ctxd server running? stop it first)", filepath.Dir(path))
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, decoded: newDecodeCache(DefaultDecodeCacheBytes)}
	if readOnly {
		return s, nil
	}
	if err := s.update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("init store %s: %w", path, err)
	}
	return s, nil
}

// SetDecodeCacheBytes bounds the cache of decoded message records: each of
// its two generations holds up to n bytes, counting the decoded messages
// with their records; 0 keeps none (every read decodes).
// Call it before the store is used.
func (s *Store) SetDecodeCacheBytes(n int) { s.decoded = newDecodeCache(n) }

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Path is the store file's path.
func (s *Store) Path() string { return s.path }

// Size is the store file's size in bytes.
func (s *Store) Size() int64 {
	var n int64
	_ = s.view(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

func sessionKey(tenant, id string) []byte {
	k := make([]byte, 0, len(tenant)+1+len(id))
	k = append(k, tenant...)
	k = append(k, 0)
	return append(k, id...)
}

// messagePrefix ends in \x00 so that session "a" never matches session "ab".
func messagePrefix(tenant, id string) []byte { return append(sessionKey(tenant, id), 0) }

func messageKey(tenant, id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(messagePrefix(tenant, id), seq)
}

// stateKey indexes a message by state, so a session's window or cold chunks
// are found without decoding every message of the session.
func stateKey(m *memory.Message) []byte {
	k := append(messagePrefix(m.Tenant, m.SessionID), stateByte(m.State))
	return binary.BigEndian.AppendUint64(k, m.Seq)
}

func stateByte(s memory.State) byte {
	for i, st := range memory.States {
		if st == s {
			return byte('a' + i)
		}
	}
	return 'z'
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// A vector record carries what the vector index needs besides the vector
// (session, state, time, role, kind), so start-up loads vectors without
// decoding every message's JSON: version byte, state byte, role byte, flags
// byte (versions 2 and up: bit 0 a summary), created_at (Unix ns, 8
// bytes), tenant and session (uvarint length + bytes), then the vector:
// versions 1 to 3 as float32s little-endian, version 4 (written now) as a
// float32 scale little-endian and one int8 code per dimension (component =
// code * scale, scale = max|component| / 127). Version 1 records have no
// flags byte; read, their kind is unknown (plain). Versions 3 and 4 end in
// a CRC-32C of everything before it (4 bytes, big-endian), as message
// records carry one (record.go): a changed byte of a vector would otherwise
// rank the message wrongly, silently.
//
// int8 codes are a quarter of the bytes: float32 vectors were a quarter of
// a replayed coding agent's data dir (0.6 bytes per byte of content), and
// the quantisation moves a cosine between two 100-d unit vectors by about
// 1e-3 (TestVectorQuantisationError), well under what separates two
// messages' relevance. The vector index's in-memory rows are float32 from
// the embedder until a restart loads the dequantised ones.
const (
	vectorRecordVersion = 4
	vectorFirstCRC      = 3 // the first version with a checksum
)

const vectorFlagSummary = 1

func encodeVector(m *memory.Message) []byte {
	b := make([]byte, 0, 4+8+2*binary.MaxVarintLen64+len(m.Tenant)+len(m.SessionID)+4+len(m.Vector))
	var flags byte
	if m.IsSummary() {
		flags |= vectorFlagSummary
	}
	b = append(b, vectorRecordVersion, stateByte(m.State), roleByte(m.Role), flags)
	b = binary.BigEndian.AppendUint64(b, uint64(m.CreatedAt.UnixNano()))
	b = binary.AppendUvarint(b, uint64(len(m.Tenant)))
	b = append(b, m.Tenant...)
	b = binary.AppendUvarint(b, uint64(len(m.SessionID)))
	b = append(b, m.SessionID...)
	var mx float64
	for _, f := range m.Vector {
		mx = max(mx, math.Abs(float64(f)))
	}
	scale := float32(mx / 127)
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(scale))
	for _, f := range m.Vector {
		var c float64
		if scale > 0 {
			c = math.Round(float64(f) / float64(scale))
		}
		b = append(b, byte(int8(max(-127, min(127, c)))))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeVectorRecord fills id, tenant, session, state, role, kind (version
// 2), time and vector.
func decodeVectorRecord(id string, b []byte) (*memory.Message, error) {
	h, err := readVectorHeader(id, b)
	if err != nil {
		return nil, err
	}
	m := &memory.Message{ID: id, State: stateOf(b[1]), Role: roleOf(b[2]),
		CreatedAt: time.Unix(0, int64(binary.BigEndian.Uint64(b[h.head:h.head+8]))).UTC(),
		Tenant:    string(h.tenant), SessionID: string(h.session), Vector: h.floats()}
	if h.summary {
		m.Kind = memory.KindSummary
	}
	return m, nil
}

// decodeVector reads only the vector of a record: a window's messages need
// it and have the rest from their JSON (a Message and two strings per
// message were most of what loading a window's vectors allocated).
func decodeVector(id string, b []byte) ([]float32, error) {
	h, err := readVectorHeader(id, b)
	if err != nil {
		return nil, err
	}
	return h.floats(), nil
}

// vectorHeader is a vector record split into its parts, unconverted.
type vectorHeader struct {
	head            int // offset of created_at
	summary         bool
	tenant, session []byte
	vector          []byte
	quantised       bool // vector is a scale and int8 codes (version 4)
}

func readVectorHeader(id string, b []byte) (vectorHeader, error) {
	bad := &memory.DamagedRecord{MessageID: id, Err: errors.New("vector record does not decode")}
	h := vectorHeader{head: 3} // version 1: no flags byte
	if len(b) > 0 && b[0] >= 2 {
		h.head = 4
	}
	if len(b) > 0 && b[0] >= vectorFirstCRC {
		if len(b) < crcLen {
			return h, bad
		}
		body := b[:len(b)-crcLen]
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-crcLen:]) {
			return h, &memory.DamagedRecord{MessageID: id, Err: fmt.Errorf("vector record: %w", errChecksum)}
		}
		b = body
	}
	if len(b) < h.head+8 || b[0] < 1 || b[0] > vectorRecordVersion {
		return h, bad
	}
	h.quantised = b[0] == vectorRecordVersion
	h.summary = h.head == 4 && b[3]&vectorFlagSummary != 0
	rest := b[h.head+8:]
	for _, dst := range []*[]byte{&h.tenant, &h.session} {
		n, k := binary.Uvarint(rest)
		if k <= 0 || uint64(len(rest)-k) < n {
			return h, bad
		}
		*dst = rest[k : k+int(n)]
		rest = rest[k+int(n):]
	}
	if h.quantised && len(rest) < 4 || !h.quantised && len(rest)%4 != 0 {
		return h, bad
	}
	h.vector = rest
	return h, nil
}

// floats decodes the vector: int8 codes times their scale, or float32s.
func (h vectorHeader) floats() []float32 {
	b := h.vector
	if h.quantised {
		scale := math.Float32frombits(binary.LittleEndian.Uint32(b))
		out := make([]float32, len(b)-4)
		for i, c := range b[4:] {
			out[i] = float32(int8(c)) * scale
		}
		return out
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

var roles = []memory.Role{memory.RoleSystem, memory.RoleUser, memory.RoleAssistant, memory.RoleTool}

func roleByte(r memory.Role) byte {
	for i, x := range roles {
		if x == r {
			return byte('a' + i)
		}
	}
	return 'z'
}

func roleOf(b byte) memory.Role {
	if i := int(b - 'a'); i >= 0 && i < len(roles) {
		return roles[i]
	}
	return ""
}

func stateOf(b byte) memory.State {
	if i := int(b - 'a'); i >= 0 && i < len(memory.States) {
		return memory.States[i]
	}
	return ""
}

// sessionExists answers ENOTFOUND for a session that is not stored, without
// decoding it: a context call lists messages three times, and decoding the
// record each time (its prune table grows with the window) was a tenth of
// a late call's cost.
func sessionExists(tx *bolt.Tx, tenant, id string) error {
	if tx.Bucket(bucketSessions).Get(sessionKey(tenant, id)) == nil {
		return memory.Errorf(memory.ENOTFOUND, "session %q not found", id)
	}
	return nil
}

func getSession(tx *bolt.Tx, tenant, id string) (*memory.Session, error) {
	b := tx.Bucket(bucketSessions).Get(sessionKey(tenant, id))
	if b == nil {
		return nil, memory.Errorf(memory.ENOTFOUND, "session %q not found", id)
	}
	return decodeSession(sessionKey(tenant, id), b)
}

// A session record is a version byte (sessionRecordVersion), a CRC-32C of
// the JSON that follows (4 bytes, big-endian), then the session as JSON:
// one changed digit of its token total or counts was served as is, and
// verify said consistent. A record that starts with '{' was written
// before the checksum: it reads unchecked, and gets one when next written.
const sessionRecordVersion = 1

func encodeSession(sess *memory.Session) ([]byte, error) {
	j, err := json.Marshal(sess)
	if err != nil {
		return nil, fmt.Errorf("encode session %s: %w", sess.ID, err)
	}
	out := make([]byte, 1+crcLen, 1+crcLen+len(j))
	out[0] = sessionRecordVersion
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(j, castagnoli))
	return append(out, j...), nil
}

// decodeSession reads the session record b stored under key; a damaged one
// is a *memory.DamagedRecord naming the session.
func decodeSession(key, b []byte) (*memory.Session, error) {
	tenant, id, _ := bytes.Cut(key, []byte{0})
	damaged := func(err error) error {
		return &memory.DamagedRecord{Tenant: string(tenant), SessionID: string(id), Err: err}
	}
	j := b
	if len(b) > 0 && b[0] == sessionRecordVersion {
		if len(b) < 1+crcLen || crc32.Checksum(b[1+crcLen:], castagnoli) != binary.BigEndian.Uint32(b[1:]) {
			return nil, damaged(fmt.Errorf("session record: %w", errChecksum))
		}
		j = b[1+crcLen:]
	}
	var sess memory.Session
	if err := unmarshalJSON(j, &sess); err != nil {
		return nil, damaged(fmt.Errorf("session record does not decode: %w", err))
	}
	return &sess, nil
}

// getOrCreateSession returns the stored session, or create() when there is
// none (saved by the caller's putSession at the end of the transaction).
func getOrCreateSession(tx *bolt.Tx, tenant, id string, create func() *memory.Session) (*memory.Session, error) {
	sess, err := getSession(tx, tenant, id)
	if memory.ErrorCode(err) == memory.ENOTFOUND {
		return create(), nil
	}
	return sess, err
}

func putSession(tx *bolt.Tx, sess *memory.Session) error {
	b, err := encodeSession(sess)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketSessions).Put(sessionKey(sess.Tenant, sess.ID), b)
}

// logChange appends to the change log the indexes follow.
func logChange(tx *bolt.Tx, c memory.Change) error {
	b := tx.Bucket(bucketChanges)
	seq, err := b.NextSequence()
	if err != nil {
		return fmt.Errorf("next change seq: %w", err)
	}
	c.Seq = seq
	v, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode change: %w", err)
	}
	return b.Put(u64(seq), v)
}

func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return memory.Errorf(memory.EUNAVAILABLE, "request cancelled: %v", err)
	}
	return nil
}
