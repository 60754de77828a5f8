package memory_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// A session's metadata has a message's limits: it comes back in every
// status and listing.
func TestSessionUpdateMetadataLimits(t *testing.T) {
	t.Parallel()
	keys := func(n, valueLen int) map[string]any {
		md := map[string]any{}
		for i := range n {
			md[fmt.Sprintf("k%d", i)] = strings.Repeat("v", valueLen)
		}
		return md
	}
	for _, c := range []struct {
		name string
		md   map[string]any
		code string
	}{
		{"64 keys", keys(64, 10), ""},
		{"65 keys", keys(65, 1), memory.EINVALID},
		{"100000 keys", keys(100000, 1), memory.EINVALID},
		{"1 MiB value", keys(1, 1<<20), memory.ETOOLARGE},
		{"nested", map[string]any{"a": map[string]any{"b": 1}}, memory.EINVALID},
		{"NUL key", map[string]any{"\x00": 1}, memory.EINVALID},
	} {
		err := memory.SessionUpdate{Metadata: c.md}.Validate()
		if memory.ErrorCode(err) != c.code {
			t.Errorf("%s: %v, want code %q", c.name, err, c.code)
		}
		if err != nil && !strings.HasPrefix(memory.ErrorMessage(err), "metadata") {
			t.Errorf("%s: message %q does not name metadata", c.name, memory.ErrorMessage(err))
		}
	}
}

// recoverable_for_days far enough out made every compaction of the session
// fail: recoverable_until past year 9999 cannot be stored.
func TestSessionUpdateRecoverableForDays(t *testing.T) {
	t.Parallel()
	for days, code := range map[int]string{1: "", 30: "", memory.MaxRecoverableForDays: "", memory.MaxRecoverableForDays + 1: memory.EINVALID, 3_000_000: memory.EINVALID, 1 << 62: memory.EINVALID} {
		err := memory.SessionUpdate{Policy: &memory.PolicyOverrides{RecoverableForDays: &days}}.Validate()
		if memory.ErrorCode(err) != code {
			t.Errorf("recoverable_for_days %d: %v, want code %q", days, err, code)
		}
	}
}

// Weights whose sum overflows left scoring with no usable weight: every
// compaction of the session failed.
func TestSessionUpdateWeights(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		w    float64
		code string
	}{{0, ""}, {0.6, ""}, {memory.MaxWeight, ""}, {memory.MaxWeight * 1.001, memory.EINVALID}, {1e308, memory.EINVALID}} {
		w := c.w
		for _, o := range []memory.PolicyOverrides{{WeightSimilarity: &w}, {WeightRecency: &w}, {WeightReferences: &w}, {WeightImportance: &w}} {
			if err := (memory.SessionUpdate{Policy: &o}).Validate(); memory.ErrorCode(err) != c.code {
				t.Errorf("weight %v in %+v: %v, want code %q", c.w, o, err, c.code)
			}
		}
	}
}
