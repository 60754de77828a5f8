package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeEmbeddings speaks the OpenAI embeddings wire format: a deterministic
// 8-dimensional bag of letters, so similar texts get similar vectors. It
// refuses what OpenAI refuses (no model, no input or more than 2,048, an
// empty string) and counts the texts of each request into sizes, if given.
func fakeEmbeddings(t *testing.T, calls *atomic.Int64, sizes ...*[]int) *httptest.Server {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		calls.Add(1)
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if req.Model == "" || len(req.Input) == 0 || len(req.Input) > 2048 || slices.Contains(req.Input, "") {
			http.Error(w, `{"error": {"message": "'$.input' is invalid", "type": "invalid_request_error"}}`, 400)
			return
		}
		mu.Lock()
		for _, s := range sizes {
			*s = append(*s, len(req.Input))
		}
		mu.Unlock()
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i, text := range req.Input {
			v := make([]float32, 8)
			for _, c := range strings.ToLower(text) {
				if c >= 'a' && c <= 'z' {
					v[(c-'a')%8]++
				}
			}
			var n float64
			for _, x := range v {
				n += float64(x * x)
			}
			for j := range v {
				v[j] /= float32(math.Sqrt(n) + 1e-9)
			}
			data = append(data, item{"embedding", i, v})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
			"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The server embeds through an OpenAI-compatible endpoint; a data dir
// remembers its model: another model is refused, or everything re-embedded
// with --reembed, and vectors of two models never mix.
func TestOpenAIEmbedderAndModelChange(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	fake := fakeEmbeddings(t, &calls)
	dir := t.TempDir()
	withFake := func(c *Config) { c.EmbedURL, c.EmbedModel = fake.URL+"/v1", "fake-8d" }

	ts := startServer(t, dir, withFake)
	ids := ts.store("e", msg("user", "zebra zebra zoo"), msg("user", "apple banana"))
	if calls.Load() == 0 {
		t.Fatal("the OpenAI-compatible endpoint was never called")
	}
	got := idsOf(ts.search(map[string]any{"query": "zebra zoo", "mode": "vector", "k": 1}))
	if len(got) != 1 || got[0] != ids[0] {
		t.Fatalf("vector search through the fake embedder = %v", got)
	}
	ts.Stop()

	// The built-in model on a data dir embedded by fake-8d: refused, clearly.
	m := NewMain(testConfig(dir))
	err := m.Run(t.Context(), nil)
	if err == nil || !strings.Contains(err.Error(), "fake-8d") || !strings.Contains(err.Error(), "--reembed") {
		m.Close()
		t.Fatalf("start with another model: %v", err)
	}

	// With --reembed every message gets a GloVe vector and search works.
	ts = startServer(t, dir, func(c *Config) { c.Reembed = true })
	got = idsOf(ts.search(map[string]any{"query": "apple banana", "mode": "vector", "k": 1}))
	if len(got) != 1 || got[0] != ids[1] {
		t.Fatalf("vector search after re-embedding = %v", got)
	}
	ts.Stop()
	ts = startServer(t, dir) // now the default model is at home here
	if got := idsOf(ts.search(map[string]any{"query": "zebra", "mode": "vector", "k": 1})); len(got) != 1 {
		t.Fatalf("after re-embed and restart: %v", got)
	}
}

// Through an OpenAI-compatible endpoint, a write's texts go in one request
// and a query asked again is not embedded again.
func TestOpenAIEmbedderBatchesAndCaches(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	var sizes []int
	fake := fakeEmbeddings(t, &calls, &sizes)
	ts := startServer(t, t.TempDir(), func(c *Config) { c.EmbedURL, c.EmbedModel = fake.URL+"/v1", "fake-8d" })
	before := calls.Load() // the dimension probe, the empty text
	msgs := make([]map[string]any, 100)
	for i := range msgs {
		msgs[i] = msg("user", fmt.Sprintf("turn %d about the zebra enclosure %s", i, strings.Repeat("and more ", i%7)))
	}
	ts.store("w", msgs...)
	if n := calls.Load() - before; n != 1 {
		t.Fatalf("a write of 100 messages made %d embeddings requests, want 1 (sizes %v)", n, sizes)
	}
	search := func() {
		if hits := ts.search(map[string]any{"query": "where is the zebra enclosure", "session_id": "w"}); len(hits) == 0 {
			t.Fatal("no hits")
		}
	}
	search() // embeds the query (and, once a server, the empty text: see queryVector)
	before = calls.Load()
	search()
	search()
	if n := calls.Load() - before; n != 0 {
		t.Fatalf("a query searched again made %d embeddings requests, want 0", n)
	}
}
