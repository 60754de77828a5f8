package index

import (
	"fmt"
	"strings"
	"testing"
)

// The document frequencies' cache is bounded by its terms' bytes: long
// terms (paths, identifiers) do not pile up to a count's bound, and a term
// kept reads back.
func TestDFCacheBoundedByBytes(t *testing.T) {
	c := &dfCache{df: map[string]uint64{}}
	long := strings.Repeat("internal/jobs/reconcile_worker_v2.go/", 30) // ~1 kB
	for i := range 10_000 {
		c.put("content", fmt.Appendf(nil, "%s%d", long, i), uint64(i))
	}
	held := 0
	for k := range c.df {
		held += len(k) + dfEntry
	}
	if held > maxDFBytes || held != c.bytes {
		t.Fatalf("the cache holds %d bytes (counted %d), bound %d", held, c.bytes, maxDFBytes)
	}
	if df, ok := c.get("content", fmt.Appendf(nil, "%s%d", long, 7)); !ok || df != 7 {
		t.Fatalf("a kept term reads back %d, %v", df, ok)
	}
}
