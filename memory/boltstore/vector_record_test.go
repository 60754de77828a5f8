package boltstore

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// A vector record says whether its message is a summary (so the vector side
// can leave summaries out after a restart), and version 1 records, written
// before it did, still read, as plain messages.
func TestVectorRecordVersions(t *testing.T) {
	at := time.Unix(1700000000, 5).UTC()
	for _, kind := range []string{"", memory.KindSummary} {
		m := &memory.Message{ID: "m1", Tenant: "t", SessionID: "s", State: memory.StateDropped, Role: memory.RoleAssistant,
			Kind: kind, CreatedAt: at, Vector: []float32{0.5, -1}}
		got, err := decodeVectorRecord("m1", encodeVector(m))
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != kind || got.State != m.State || got.Role != m.Role || !got.CreatedAt.Equal(at) ||
			got.Tenant != "t" || got.SessionID != "s" || !slices.Equal(got.Vector, m.Vector) {
			t.Errorf("kind %q: decoded %+v", kind, got)
		}
	}

	v1 := []byte{1, stateByte(memory.StateSummarized), roleByte(memory.RoleUser)}
	v1 = binary.BigEndian.AppendUint64(v1, uint64(at.UnixNano()))
	v1 = append(binary.AppendUvarint(v1, 1), 't')
	v1 = append(binary.AppendUvarint(v1, 1), 's')
	v1 = binary.LittleEndian.AppendUint32(v1, math.Float32bits(2))
	got, err := decodeVectorRecord("old", v1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != "" || got.State != memory.StateSummarized || got.SessionID != "s" || !slices.Equal(got.Vector, []float32{2}) {
		t.Errorf("version 1 record decoded as %+v", got)
	}
	for _, bad := range [][]byte{nil, {3, 0, 0, 0}, v1[:5], append(slices.Clone(v1), 0)} {
		if _, err := decodeVectorRecord("bad", bad); err == nil {
			t.Errorf("damaged record %v decoded", bad)
		}
	}
}
