package openai

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A write's texts go in one request, within the count and byte bounds; a
// text repeated in the call is sent once.
func TestOneRequestPerWrite(t *testing.T) {
	f, srv := newFake(t, 8)
	e := mustNew(t, cfg(srv, 8)) // the defaults
	in := make([]string, 100)
	for i := range in {
		in[i] = fmt.Sprintf("message %d %s", i, strings.Repeat("log line ", 100+i))
	}
	in[50], in[70] = "", "" // empty tool results
	in[99] = in[3]
	got, err := e.Embed(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, append([]string{}, replaceEmpty(in)...), got, 8)
	batches, _, _ := f.requests()
	if len(batches) != 1 || len(batches[0]) != 98 {
		t.Fatalf("%d requests (first of %d texts), want 1 of the 98 distinct texts", len(batches), len(batches[0]))
	}
	got[3][0] = 42 // the caller's own: its repeat is not changed
	if got[99][0] == 42 {
		t.Fatal("a repeated text's vector is shared with its first")
	}

	// Past BatchBytes a batch is cut; a text longer than it goes alone.
	f2, srv2 := newFake(t, 8)
	c := cfg(srv2, 8)
	c.BatchBytes = 1000
	e = mustNew(t, c)
	big := []string{strings.Repeat("a", 600), strings.Repeat("b", 300), strings.Repeat("c", 300), strings.Repeat("d", 2000), "e"}
	if _, err := e.Embed(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	batches, _, _ = f2.requests()
	var sizes []int
	for _, b := range batches {
		sizes = append(sizes, len(b))
	}
	if fmt.Sprint(sizes) != "[2 1 1 1]" {
		t.Fatalf("batch sizes %v, want [2 1 1 1]", sizes)
	}
}

func replaceEmpty(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = s
		if s == "" {
			out[i] = " "
		}
	}
	return out
}

// A query embedded again is answered from the cache, a copy each time; the
// least recently used leave first, long texts are not kept, and a negative
// CacheSize keeps nothing.
func TestCacheAnswersRepeatedQueries(t *testing.T) {
	f, srv := newFake(t, 8)
	c := cfg(srv, 8)
	c.CacheSize = 2
	e := mustNew(t, c)
	ctx := context.Background()
	embed := func(text string) []float32 {
		t.Helper()
		v, err := e.Embed(ctx, []string{text})
		if err != nil {
			t.Fatal(err)
		}
		checkVectors(t, []string{text}, v, 8)
		return v[0]
	}
	sent := func() int { b, _, _ := f.requests(); return len(b) }

	v := embed("who is on call tonight")
	v[0] = 42 // must not reach the cache
	embed("who is on call tonight")
	if n := sent(); n != 1 {
		t.Fatalf("%d requests for one query asked twice, want 1", n)
	}
	// In a batch too: a cached text is not sent again.
	if _, err := e.Embed(ctx, []string{"deploy", "who is on call tonight"}); err != nil {
		t.Fatal(err)
	}
	if b, _, _ := f.requests(); fmt.Sprint(b[1]) != "[deploy]" {
		t.Fatalf("sent %q, want only the new text", b[1])
	}
	embed("rollback") // evicts "who is on call tonight", used before "deploy"
	embed("deploy")
	if n := sent(); n != 3 {
		t.Fatalf("%d requests, want 3 (deploy cached)", n)
	}
	embed("who is on call tonight")
	if n := sent(); n != 4 {
		t.Fatalf("%d requests, want 4 (the evicted query sent again)", n)
	}
	long := strings.Repeat("x", cacheMaxTextBytes+1)
	embed(long)
	embed(long)
	if n := sent(); n != 6 {
		t.Fatalf("%d requests, want 6 (a long text is not kept)", n)
	}

	f2, srv2 := newFake(t, 8)
	c = cfg(srv2, 8)
	c.CacheSize = -1
	e = mustNew(t, c)
	for range 2 {
		if _, err := e.Embed(ctx, []string{"q"}); err != nil {
			t.Fatal(err)
		}
	}
	if b, _, _ := f2.requests(); len(b) != 2 {
		t.Fatalf("without a cache: %d requests, want 2", len(b))
	}
}
