package memory

import (
	"fmt"
	"strings"
	"testing"
)

// lenTokenizer counts a text's bytes.
type lenTokenizer struct{}

func (lenTokenizer) Count(_, text string) (int, error) { return len(text), nil }

// The salient names' cache is bounded by what its entries hold, not by
// their count: large texts (tool outputs of tens of kB) do not pile up to
// the count's bound, a text larger than the whole cache is not kept, and a
// text read again is a hit.
func TestSalientCacheBoundedByBytes(t *testing.T) {
	const limit = 1 << 20
	c := salientCache{limit: limit}
	line := "go test ./memory/boltstore -run TestDecodeCache_hits\n"
	big := strings.Repeat(line, 40_000/len(line)) // ~40 kB
	for i := range 200 {
		text := fmt.Sprintf("output %d\n%s", i, big)
		if got := c.get(fmt.Sprint(i), 0, text); got.text != text {
			t.Fatalf("entry %d: names of another text", i)
		}
		if c.bytes > limit {
			t.Fatalf("after %d entries the cache holds %d bytes, bound %d", i+1, c.bytes, limit)
		}
	}
	if sum := sumSalient(&c); sum != c.bytes {
		t.Fatalf("the cache counts %d bytes, its entries hold %d", c.bytes, sum)
	}
	text := "output 199\n" + big
	if n := c.get("199", 0, text); c.m[salientKey{"199", 0}] != n {
		t.Fatal("the text read last is not kept")
	}
	huge := strings.Repeat(line, 2*limit/len(line))
	c.get("huge", 0, huge)
	if _, ok := c.m[salientKey{"huge", 0}]; ok || c.bytes > limit {
		t.Fatalf("a text larger than the cache was kept (%d bytes held)", c.bytes)
	}
}

func sumSalient(c *salientCache) int {
	n := 0
	for _, e := range c.m {
		n += e.size()
	}
	return n
}

// The token counts' cache is bounded by its texts' bytes.
func TestCountCacheBoundedByBytes(t *testing.T) {
	const limit = 64 << 10
	c := countCache{limit: limit}
	text := strings.Repeat("x", 1000)
	for i := range 500 {
		s := fmt.Sprintf("%d %s", i, text)
		n, err := c.count(lenTokenizer{}, "o200k_base", s)
		if err != nil || n != len(s) {
			t.Fatalf("count %d: %d, %v", i, n, err)
		}
		if c.bytes > limit {
			t.Fatalf("after %d texts the cache holds %d bytes, bound %d", i+1, c.bytes, limit)
		}
	}
	held := 0
	for k := range c.m {
		held += countEntry + len(k[0]) + len(k[1])
	}
	if held != c.bytes || held == 0 {
		t.Fatalf("the cache counts %d bytes, its entries hold %d", c.bytes, held)
	}
}
