package boltstore

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
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
			got.Tenant != "t" || got.SessionID != "s" || len(got.Vector) != 2 || got.Vector[1] != -1 || math.Abs(float64(got.Vector[0])-0.5) > 0.5/127 {
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
	// version 2: a flags byte, float32s
	v2 := []byte{2, stateByte(memory.StateDropped), roleByte(memory.RoleTool), vectorFlagSummary}
	v2 = binary.BigEndian.AppendUint64(v2, uint64(at.UnixNano()))
	v2 = append(binary.AppendUvarint(v2, 1), 't')
	v2 = append(binary.AppendUvarint(v2, 1), 's')
	v2 = binary.LittleEndian.AppendUint32(v2, math.Float32bits(0.25))
	v2 = binary.LittleEndian.AppendUint32(v2, math.Float32bits(-3))
	if got, err = decodeVectorRecord("v2", v2); err != nil {
		t.Fatal(err)
	}
	if got.Kind != memory.KindSummary || got.Role != memory.RoleTool || !slices.Equal(got.Vector, []float32{0.25, -3}) {
		t.Errorf("version 2 record decoded as %+v", got)
	}
	v3 := encodeVector(&memory.Message{Tenant: "t", SessionID: "s", Vector: []float32{1, 2}})
	for _, bad := range [][]byte{nil, {5, 0, 0, 0}, v1[:5], append(slices.Clone(v1), 0), v3[:len(v3)-3], append(slices.Clone(v2), 0)} {
		if _, err := decodeVectorRecord("bad", bad); err == nil {
			t.Errorf("damaged record %v decoded", bad)
		}
	}
}

// Stored vectors are int8 codes with a scale: the cosine of two unit
// vectors read back moves by about 1e-3, and a vector's nearest neighbour
// among others stays the same unless two were within that.
func TestVectorQuantisationError(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	unit := func(dims int) []float32 {
		v := make([]float32, dims)
		var n float64
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			n += float64(v[i] * v[i])
		}
		for i := range v {
			v[i] /= float32(math.Sqrt(n))
		}
		return v
	}
	cos := func(a, b []float32) float64 {
		var d, na, nb float64
		for i := range a {
			d += float64(a[i]) * float64(b[i])
			na += float64(a[i]) * float64(a[i])
			nb += float64(b[i]) * float64(b[i])
		}
		return d / math.Sqrt(na*nb)
	}
	for _, dims := range []int{100, 384, 1536} {
		worst := 0.0
		for range 200 {
			a, b := unit(dims), unit(dims)
			// b close to a, as two related messages' vectors are
			for i := range b {
				b[i] = a[i] + 0.3*b[i]
			}
			ga, err := decodeVector("a", encodeVector(&memory.Message{Vector: a}))
			if err != nil {
				t.Fatal(err)
			}
			gb, err := decodeVector("b", encodeVector(&memory.Message{Vector: b}))
			if err != nil {
				t.Fatal(err)
			}
			worst = max(worst, math.Abs(cos(ga, gb)-cos(a, b)))
		}
		if worst > 2e-3 {
			t.Errorf("%d dims: a cosine moved by %.5f", dims, worst)
		}
		t.Logf("%d dims: worst cosine error %.5f", dims, worst)
	}
}
