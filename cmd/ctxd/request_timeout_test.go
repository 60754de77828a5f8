package main

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The request timeout holds for a write of megabytes: the work stops between
// messages once the deadline passes, and the answer comes by the deadline
// plus about one message's work, with nothing stored. Eight messages of
// 1 MB answered 16 s after a 1 s timeout: counting and cutting every message
// ran to the end before the first check. The bound is relative to one
// message's measured cost, so a loaded machine does not fail it.
func TestRequestTimeoutHoldsForAHugeWrite(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	rng := rand.New(rand.NewPCG(26, 2))
	words := make([]string, 4000)
	for i := range words {
		b := make([]byte, 3+rng.IntN(7))
		for j := range b {
			b[j] = byte('a' + rng.IntN(26))
		}
		words[i] = string(b)
	}
	text := func() string {
		var sb strings.Builder
		for sb.Len() < 1000000-12 {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		return sb.String()
	}
	batch := func(n int) map[string]any {
		msgs := make([]map[string]any, n)
		for i := range msgs {
			msgs[i] = msg("user", text())
		}
		return map[string]any{"messages": msgs}
	}
	ts := startServer(t, t.TempDir(), func(c *Config) { c.RequestTimeout = timeout })
	// One message's cost, with the deadline out of the way: a message
	// of a session with a window it fits in, stored in full.
	one, free := batch(1), startServer(t, t.TempDir())
	start := time.Now()
	res := free.do("POST", "/v1/sessions/one/messages", one)
	perMessage := time.Since(start)
	if res.Status != 201 {
		t.Fatalf("one message without a deadline: %d %.300s", res.Status, res.Raw)
	}
	eight := batch(8)
	start = time.Now()
	res = ts.do("POST", "/v1/sessions/huge/messages", eight)
	took := time.Since(start)
	if res.Status != 503 || !strings.Contains(string(res.Raw), "--request-timeout") {
		t.Fatalf("8 x 1 MB with a %v timeout: %d %.300s, want 503 naming the request timeout", timeout, res.Status, res.Raw)
	}
	if limit := timeout + 2*perMessage + time.Second; took > limit {
		t.Fatalf("8 x 1 MB answered after %v, over the %v timeout plus two messages' work (%v each): want by %v", took, timeout, perMessage, limit)
	}
	if got := ts.do("GET", "/v1/sessions/huge", nil); got.Status != 404 {
		t.Fatalf("the timed-out write left a session: %d %.200s", got.Status, got.Raw)
	}
	t.Logf("one message %v; 8 x 1 MB answered %d after %v", perMessage, res.Status, took)
}
