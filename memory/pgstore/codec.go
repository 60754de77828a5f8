package pgstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/ctxd/ctxd/memory"
)

// A message row holds the message as JSON (body, without its vector), the
// columns the reads filter on (state, seq) or that loading the vector index
// needs without the body (role, kind, created_at), and the vector.

func encodeMessage(m *memory.Message) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode message %s: %w", m.ID, err)
	}
	return b, nil
}

// decodeMessage reads a row's body; one that does not decode is a
// *memory.DamagedRecord naming where it is.
func decodeMessage(tenant, session string, seq uint64, id string, body []byte) (*memory.Message, error) {
	var m memory.Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, &memory.DamagedRecord{Tenant: tenant, SessionID: session, Seq: seq, MessageID: id,
			Err: fmt.Errorf("message record does not decode: %w", err)}
	}
	m.Tenant, m.SessionID, m.Seq = tenant, session, seq
	return &m, nil
}

func encodeSession(sess *memory.Session) ([]byte, error) {
	b, err := json.Marshal(sess)
	if err != nil {
		return nil, fmt.Errorf("encode session %s: %w", sess.ID, err)
	}
	return b, nil
}

func decodeSession(tenant, id string, body []byte) (*memory.Session, error) {
	var sess memory.Session
	if err := json.Unmarshal(body, &sess); err != nil {
		return nil, &memory.DamagedRecord{Tenant: tenant, SessionID: id, Err: fmt.Errorf("session record does not decode: %w", err)}
	}
	return &sess, nil
}

// A vector is stored as the embedded store keeps it: a float32 scale
// (little-endian) and one int8 code per dimension, component = code *
// scale, a quarter of float32s' bytes (see boltstore's vector records for
// the error this costs: about 1e-3 of a cosine).
func encodeVector(v []float32) []byte {
	if v == nil {
		return nil
	}
	var mx float64
	for _, f := range v {
		mx = max(mx, math.Abs(float64(f)))
	}
	scale := float32(mx / 127)
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(v)), math.Float32bits(scale))
	for _, f := range v {
		var c float64
		if scale > 0 {
			c = math.Round(float64(f) / float64(scale))
		}
		b = append(b, byte(int8(max(-127, min(127, c)))))
	}
	return b
}

func decodeVector(id string, b []byte) ([]float32, error) {
	if b == nil {
		return nil, nil
	}
	if len(b) < 4 {
		return nil, &memory.DamagedRecord{MessageID: id, Err: fmt.Errorf("vector of %d bytes does not decode", len(b))}
	}
	scale := math.Float32frombits(binary.LittleEndian.Uint32(b))
	out := make([]float32, len(b)-4)
	for i, c := range b[4:] {
		out[i] = float32(int8(c)) * scale
	}
	return out, nil
}
