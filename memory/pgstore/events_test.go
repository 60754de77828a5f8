package pgstore

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The event log in the database reads back as the file log does: the
// last n events a filter keeps, oldest first, across pages of the table;
// strings clipped, the log's own time, numbers as json.Number; the
// newest Keep of a tenant's stream kept.
func TestEventsTail(t *testing.T) {
	s := openTest(t)
	at := time.Date(2025, 1, 15, 9, 30, 0, 0, time.UTC)
	ev := s.Events(func() time.Time { return at })
	ev.Keep = 1500
	for i := range 2*trimEvery + 10 {
		tenant := []string{"a", "b"}[i%2]
		if err := ev.Log("compaction", map[string]any{"tenant": tenant, "i": i, "prompt": strings.Repeat("x", 400)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ev.Log("drops", map[string]any{"tenant": "a", "i": -1}); err != nil {
		t.Fatal(err)
	}
	ofA := func(e map[string]any) bool { return e["tenant"] == "a" }
	last, err := ev.Tail("compaction", 3, ofA)
	if err != nil || len(last) != 3 {
		t.Fatalf("tail 3: %v, %v", last, err)
	}
	for k, want := range []string{"2004", "2006", "2008"} {
		if n, ok := last[k]["i"].(json.Number); !ok || n.String() != want {
			t.Fatalf("tail 3 of a: %v, want i %v oldest first", last, want)
		}
	}
	if p := last[0]["prompt"].(string); len(p) >= 400 || last[0]["time"] != "2025-01-15T09:30:00Z" {
		t.Fatalf("an event as read back: prompt of %d bytes, time %v", len(p), last[0]["time"])
	}
	// The 2,000th event, b's, trimmed b's part of the stream to its
	// newest 1,500 (ids): a's is the tenant's own and stays whole.
	all, err := ev.Tail("compaction", 0, ofA)
	if err != nil || len(all) != 1005 {
		t.Fatalf("every kept event of a: %d, %v; want all 1,005", len(all), err)
	}
	ofB, err := ev.Tail("compaction", 0, func(e map[string]any) bool { return e["tenant"] == "b" })
	if err != nil || len(ofB) < 700 || len(ofB) > 800 {
		t.Fatalf("kept events of b: %d, %v; want those of the newest 1,500 ids at its trim", len(ofB), err)
	}
	if drops, err := ev.Tail("drops", 10, nil); err != nil || len(drops) != 1 {
		t.Fatalf("another stream: %v, %v", drops, err)
	}
	// A server given no clock (serve's default) logs on the real one.
	if err := s.Events(nil).Log("purges", map[string]any{"tenant": "a"}); err != nil {
		t.Fatal(err)
	}
}
