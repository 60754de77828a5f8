package scoring

import (
	"fmt"
	"testing"
)

// The term cache stays within two generations of its limit counting what
// each entry holds besides its scan: every text scanned is an entry, and
// short texts, which scan to a few bytes or none, must not pile up by the
// thousand.
func TestTermCacheBounded(t *testing.T) {
	const limit = 16 << 10
	c := newTermCache(limit)
	for i := range 5000 {
		text := fmt.Sprint(i)
		if i%2 == 0 {
			text = "…" + text // scans to some terms, or none: both are entries
		}
		k := c.key(text, 0, 0)
		if _, ok := c.get(k); !ok {
			c.put(k, scanTerms(text, 0, 0, nil))
		}
		if n := len(c.cur) + len(c.prev); n*64 > 2*limit {
			t.Fatalf("after %d texts the cache holds %d entries, limit %d bytes a generation", i+1, n, limit)
		}
	}
	if len(c.cur) == 0 {
		t.Fatal("the cache keeps nothing")
	}
}
