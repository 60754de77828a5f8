package boltstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// The cache stays within two generations of its limit while records come
// and go, and every read decodes to what the record says.
func TestDecodeCacheBounded(t *testing.T) {
	c := newDecodeCache(2000)
	rec := func(i, v int) []byte {
		b, _ := json.Marshal(&memory.Message{ID: fmt.Sprintf("m%d", i), Content: fmt.Sprintf("v%d", v)})
		return b
	}
	for round := range 5 {
		for i := range 100 {
			key := []byte(fmt.Sprint(i))
			raw := rec(i, round/2) // every other round rewrites them all
			got, err := c.decode(key, raw)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := decodeMessage(raw)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, record %d: %+v, want %+v", round, i, got, want)
			}
			size := 0
			for _, g := range []map[string]*decoded{c.cur, c.prev} {
				for _, d := range g {
					size += len(d.raw)
				}
			}
			if size > 2*c.limitBytes {
				t.Fatalf("cache holds %d bytes of records, limit %d a generation", size, c.limitBytes)
			}
		}
	}
}
