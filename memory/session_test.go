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
