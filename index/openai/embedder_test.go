package openai

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// fake speaks the OpenAI embeddings wire format on POST /v1/embeddings, so the
// real go-openai client code runs against it.
type fake struct {
	t   *testing.T
	dim int

	// status, if set, picks an error status for request n (0-based); 0 answers normally.
	status func(n int) int
	// sleep delays every answer (cut short when the client goes away).
	sleep time.Duration
	// onRequest runs at the start of each request.
	onRequest func(n int)
	// reorder rearranges the data items before they are sent; default: reversed,
	// so a client trusting response order gets every vector wrong.
	reorder func(items []item) []item
	// vec overrides the vector for a text.
	vec func(text string) []float32

	calls atomic.Int32

	mu       sync.Mutex
	batches  [][]string
	auth     []string
	hasAuth  []bool
	encoding []any
	models   []string
}

type item struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

func newFake(t *testing.T, dim int) (*fake, *httptest.Server) {
	t.Helper()
	f := &fake{t: t, dim: dim}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	n := int(f.calls.Add(1)) - 1
	if f.onRequest != nil {
		f.onRequest(n)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		writeErr(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	var req struct {
		Input          []string `json:"input"`
		Model          string   `json:"model"`
		EncodingFormat any      `json:"encoding_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, "bad json: "+err.Error())
		return
	}
	auth, hasAuth := r.Header["Authorization"]
	f.mu.Lock()
	f.batches = append(f.batches, req.Input)
	f.auth = append(f.auth, strings.Join(auth, ","))
	f.hasAuth = append(f.hasAuth, hasAuth)
	f.encoding = append(f.encoding, req.EncodingFormat)
	f.models = append(f.models, req.Model)
	f.mu.Unlock()

	if f.sleep > 0 {
		select {
		case <-time.After(f.sleep):
		case <-r.Context().Done():
			return
		}
	}
	if f.status != nil {
		if code := f.status(n); code != 0 {
			writeErr(w, code, fmt.Sprintf("fake failure %d (auth %q)", code, r.Header.Get("Authorization")))
			return
		}
	}
	// OpenAI's limits on one request: 1 to 2,048 inputs.
	if len(req.Input) == 0 || len(req.Input) > 2048 {
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("'$.input' is invalid: %d items, must be 1 to 2048", len(req.Input)))
		return
	}
	for _, in := range req.Input {
		if in == "" {
			writeErr(w, http.StatusBadRequest, "'$.input' is invalid: empty string")
			return
		}
	}

	items := make([]item, len(req.Input))
	for i, text := range req.Input {
		v := f.vector(text)
		var emb any = v
		if req.EncodingFormat == "base64" {
			buf := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(x))
			}
			emb = base64.StdEncoding.EncodeToString(buf)
		}
		items[i] = item{Object: "embedding", Index: i, Embedding: emb}
	}
	if f.reorder != nil {
		items = f.reorder(items)
	} else {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"object": "list",
		"data":   items,
		"model":  req.Model,
		"usage":  map[string]int{"prompt_tokens": len(req.Input), "total_tokens": len(req.Input)},
	})
}

func (f *fake) vector(text string) []float32 {
	if f.vec != nil {
		return f.vec(text)
	}
	return fakeVec(text, f.dim)
}

func writeErr(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": "fake_error", "param": nil, "code": nil},
	})
}

func (f *fake) requests() (batches [][]string, auth []string, hasAuth []bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.batches...), append([]string(nil), f.auth...), append([]bool(nil), f.hasAuth...)
}

// fakeVec is a deterministic, unnormalised vector that differs per text.
func fakeVec(text string, dim int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(text))
	s := h.Sum64()
	v := make([]float32, dim)
	for j := range v {
		v[j] = float32(int((s>>(j%56))&0xff)-128) + 0.5
	}
	return v
}

func unit(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(sum))
	}
	return out
}

func near(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-6 {
			return false
		}
	}
	return true
}

// cfg is a fast-failing config against srv.
func cfg(srv *httptest.Server, dim int) Config {
	return Config{
		BaseURL: srv.URL + "/v1",
		Model:   "test-embed",
		Dim:     dim,
		Timeout: 2 * time.Second,
		Backoff: time.Millisecond,
	}
}

func mustNew(t *testing.T, c Config) *Embedder {
	t.Helper()
	e, err := NewEmbedder(context.Background(), c)
	if err != nil {
		t.Fatalf("NewEmbedder: %v", err)
	}
	return e
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("text number %d", i)
	}
	return out
}

func checkVectors(t *testing.T, in []string, got [][]float32, dim int) {
	t.Helper()
	if len(got) != len(in) {
		t.Fatalf("got %d vectors for %d texts", len(got), len(in))
	}
	for i, text := range in {
		if want := unit(fakeVec(text, dim)); !near(got[i], want) {
			t.Fatalf("vector %d (%q) does not match its text", i, text)
		}
	}
}

func TestBatching(t *testing.T) {
	f, srv := newFake(t, 16)
	c := cfg(srv, 16)
	c.BatchSize = 64
	e := mustNew(t, c)

	in := texts(150)
	got, err := e.Embed(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, in, got, 16)

	batches, _, _ := f.requests()
	var sizes []int
	for _, b := range batches {
		sizes = append(sizes, len(b))
	}
	if fmt.Sprint(sizes) != "[64 64 22]" {
		t.Fatalf("batch sizes %v, want [64 64 22]", sizes)
	}
	if batches[1][0] != in[64] || batches[2][21] != in[149] {
		t.Fatalf("batches do not follow input order")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.models {
		if f.models[i] != "test-embed" {
			t.Errorf("request %d model %q", i, f.models[i])
		}
		// v1.43.0 sends encoding_format only when set; unset means float.
		if f.encoding[i] != nil {
			t.Errorf("request %d encoding_format %v, want absent (float)", i, f.encoding[i])
		}
	}
}

func TestOrderFollowsIndex(t *testing.T) {
	f, srv := newFake(t, 8)
	f.reorder = func(items []item) []item {
		// A fixed permutation that moves every item.
		out := make([]item, len(items))
		for i := range items {
			out[(i*3+1)%len(items)] = items[i]
		}
		return out
	}
	e := mustNew(t, cfg(srv, 8))
	in := texts(10)
	got, err := e.Embed(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, in, got, 8)
}

func TestBadIndexes(t *testing.T) {
	for name, reorder := range map[string]func([]item) []item{
		"duplicate":    func(items []item) []item { items[1].Index = items[0].Index; return items },
		"out of range": func(items []item) []item { items[0].Index = len(items); return items },
		"missing":      func(items []item) []item { return items[1:] },
	} {
		t.Run(name, func(t *testing.T) {
			f, srv := newFake(t, 4)
			f.reorder = reorder
			e := mustNew(t, cfg(srv, 4))
			if _, err := e.Embed(context.Background(), texts(3)); err == nil {
				t.Fatal("want error")
			}
			if n := f.calls.Load(); n != 1 {
				t.Fatalf("%d requests, want 1 (malformed answers are not retried)", n)
			}
		})
	}
}

func TestProbeDim(t *testing.T) {
	f, srv := newFake(t, 12)
	e := mustNew(t, cfg(srv, 0))
	if e.Dim() != 12 {
		t.Fatalf("Dim %d, want 12", e.Dim())
	}
	batches, _, _ := f.requests()
	if len(batches) != 1 || len(batches[0]) != 1 {
		t.Fatalf("probe requests %v, want one request with one text", batches)
	}

	// A configured Dim skips the probe.
	before := f.calls.Load()
	e = mustNew(t, cfg(srv, 12))
	if f.calls.Load() != before || e.Dim() != 12 {
		t.Fatalf("NewEmbedder with Dim set made a request")
	}
}

func TestProbeUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/v1"
	srv.Close()

	c := Config{BaseURL: url, Model: "m", Timeout: time.Second, Backoff: time.Millisecond, MaxRetries: 1}
	_, err := NewEmbedder(context.Background(), c)
	if err == nil {
		t.Fatal("want error")
	}
	if !strings.Contains(err.Error(), url) {
		t.Fatalf("error %q does not name %s", err, url)
	}
	if memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("code %q, want %q", memory.ErrorCode(err), memory.EUNAVAILABLE)
	}
}

func TestProbeWrongPath(t *testing.T) {
	_, srv := newFake(t, 4)
	c := cfg(srv, 0)
	c.BaseURL = srv.URL // missing /v1
	_, err := NewEmbedder(context.Background(), c)
	if err == nil {
		t.Fatal("want error")
	}
	for _, want := range []string{srv.URL, "404", "/v1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestDimMismatch(t *testing.T) {
	_, srv := newFake(t, 4)
	e := mustNew(t, cfg(srv, 8))
	_, err := e.Embed(context.Background(), []string{"a"})
	if err == nil || !strings.Contains(err.Error(), "returned 4 dimensions, want 8") {
		t.Fatalf("err %v, want dimension mismatch", err)
	}
}

func TestRetryTransient(t *testing.T) {
	for _, code := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusTooManyRequests} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			f, srv := newFake(t, 4)
			f.status = func(n int) int {
				if n < 2 {
					return code
				}
				return 0
			}
			e := mustNew(t, cfg(srv, 4))
			in := texts(3)
			got, err := e.Embed(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			checkVectors(t, in, got, 4)
			if n := f.calls.Load(); n != 3 {
				t.Fatalf("%d requests, want 3", n)
			}
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	f, srv := newFake(t, 4)
	f.status = func(int) int { return http.StatusServiceUnavailable }
	c := cfg(srv, 4)
	c.MaxRetries = 2
	e := mustNew(t, c)
	_, err := e.Embed(context.Background(), []string{"a"})
	if memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("err %v, want %s", err, memory.EUNAVAILABLE)
	}
	if !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("err %q should give the status and attempt count", err)
	}
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

func TestNoRetries(t *testing.T) {
	f, srv := newFake(t, 4)
	f.status = func(int) int { return http.StatusInternalServerError }
	c := cfg(srv, 4)
	c.MaxRetries = -1
	e := mustNew(t, c)
	if _, err := e.Embed(context.Background(), []string{"a"}); err == nil {
		t.Fatal("want error")
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestNoRetryOn4xx(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			f, srv := newFake(t, 4)
			f.status = func(int) int { return code }
			e := mustNew(t, cfg(srv, 4))
			_, err := e.Embed(context.Background(), []string{"a"})
			if err == nil {
				t.Fatal("want error")
			}
			if n := f.calls.Load(); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
			// Refusals are configuration problems: not described to API clients.
			var de *memory.Error
			if errors.As(err, &de) {
				t.Fatalf("err %v is a *memory.Error (%s), want an internal error", err, de.Code)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(code)) {
				t.Fatalf("err %q lacks the status", err)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	f, srv := newFake(t, 4)
	f.sleep = 5 * time.Second
	c := cfg(srv, 4)
	c.Timeout = 50 * time.Millisecond
	c.MaxRetries = 1
	e := mustNew(t, c)

	start := time.Now()
	_, err := e.Embed(context.Background(), []string{"a"})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Embed took %v", el)
	}
	if memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("err %v, want %s", err, memory.EUNAVAILABLE)
	}
	if !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err %q should say it timed out", err)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("%d requests, want 2 (timeouts are retried)", n)
	}
}

func TestCancelStopsRetries(t *testing.T) {
	f, srv := newFake(t, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.status = func(int) int { return http.StatusInternalServerError }
	f.onRequest = func(int) { cancel() }
	c := cfg(srv, 4)
	c.Backoff = 10 * time.Second
	c.MaxRetries = 5
	e := mustNew(t, c)

	start := time.Now()
	_, err := e.Embed(ctx, []string{"a"})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Embed took %v after cancellation", el)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled in the chain", err)
	}
	if memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("code %q, want %s", memory.ErrorCode(err), memory.EUNAVAILABLE)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	f, srv := newFake(t, 4)
	f.status = func(int) int { return http.StatusInternalServerError }
	c := cfg(srv, 4)
	c.Backoff = 10 * time.Second
	e := mustNew(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()

	start := time.Now()
	_, err := e.Embed(ctx, []string{"a"})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Embed took %v", el)
	}
	if !errors.Is(err, context.DeadlineExceeded) || memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("err %v, want deadline exceeded, %s", err, memory.EUNAVAILABLE)
	}
	if !strings.Contains(err.Error(), "500") {
		t.Fatalf("err %q should keep the last upstream error", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestAuthorization(t *testing.T) {
	t.Run("key", func(t *testing.T) {
		f, srv := newFake(t, 4)
		c := cfg(srv, 0)
		c.APIKey = "sk-test-123"
		e := mustNew(t, c)
		if _, err := e.Embed(context.Background(), []string{"a"}); err != nil {
			t.Fatal(err)
		}
		_, auth, _ := f.requests()
		for i, a := range auth {
			if a != "Bearer sk-test-123" {
				t.Fatalf("request %d Authorization %q", i, a)
			}
		}
	})
	t.Run("none", func(t *testing.T) {
		f, srv := newFake(t, 4)
		e := mustNew(t, cfg(srv, 0))
		if _, err := e.Embed(context.Background(), []string{"a"}); err != nil {
			t.Fatal(err)
		}
		_, _, has := f.requests()
		for i, h := range has {
			if h {
				t.Fatalf("request %d sent an Authorization header", i)
			}
		}
	})
}

func TestAPIKeyNotInErrors(t *testing.T) {
	const key = "sk-very-secret-key"
	for _, code := range []int{http.StatusUnauthorized, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			f, srv := newFake(t, 4)
			f.status = func(int) int { return code } // the fake echoes the header
			c := cfg(srv, 4)
			c.APIKey = key
			e := mustNew(t, c)
			_, err := e.Embed(context.Background(), []string{"a"})
			if err == nil {
				t.Fatal("want error")
			}
			if strings.Contains(err.Error(), key) {
				t.Fatalf("error leaks the key: %q", err)
			}
			c.Dim = 0
			_, err = NewEmbedder(context.Background(), c)
			if err == nil || strings.Contains(err.Error(), key) {
				t.Fatalf("probe error leaks the key: %q", err)
			}
		})
	}
}

func TestLongErrorBodyShortened(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "<html>\n"+strings.Repeat("bad gateway ", 1000)+"</html>")
	}))
	defer srv.Close()
	c := cfg(srv, 4)
	c.MaxRetries = -1
	e := mustNew(t, c)
	_, err := e.Embed(context.Background(), []string{"a"})
	if memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("err %v, want %s", err, memory.EUNAVAILABLE)
	}
	if len(err.Error()) > 2*maxErrLen || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error not shortened (%d bytes): %q", len(err.Error()), err)
	}
}

func TestNormalisation(t *testing.T) {
	f, srv := newFake(t, 2)
	f.vec = func(text string) []float32 {
		if text == "zero" {
			return []float32{0, 0}
		}
		return []float32{3, 4}
	}
	e := mustNew(t, cfg(srv, 2))
	got, err := e.Embed(context.Background(), []string{"a", "zero"})
	if err != nil {
		t.Fatal(err)
	}
	if !near(got[0], []float32{0.6, 0.8}) {
		t.Fatalf("got %v, want [0.6 0.8]", got[0])
	}
	if !near(got[1], []float32{0, 0}) {
		t.Fatalf("zero vector became %v", got[1])
	}
}

func TestEmptyStrings(t *testing.T) {
	f, srv := newFake(t, 4)
	e := mustNew(t, cfg(srv, 4))
	got, err := e.Embed(context.Background(), []string{"", "a", ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !near(got[0], unit(fakeVec(" ", 4))) || !near(got[2], got[0]) {
		t.Fatalf("got %v", got)
	}
	batches, _, _ := f.requests()
	if fmt.Sprintf("%q", batches[0]) != `[" " "a"]` { // the empty text once
		t.Fatalf("sent %q", batches[0])
	}
}

func TestEmbedNothing(t *testing.T) {
	f, srv := newFake(t, 4)
	e := mustNew(t, cfg(srv, 4))
	got, err := e.Embed(context.Background(), nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v", got, err)
	}
	if f.calls.Load() != 0 {
		t.Fatal("made a request for no texts")
	}
}

func TestConcurrentEmbed(t *testing.T) {
	_, srv := newFake(t, 8)
	c := cfg(srv, 8)
	c.BatchSize = 3
	e := mustNew(t, c)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			in := texts(10 + g)
			got, err := e.Embed(context.Background(), in)
			if err != nil {
				t.Error(err)
				return
			}
			checkVectors(t, in, got, 8)
		})
	}
	wg.Wait()
}

func TestModel(t *testing.T) {
	_, srv := newFake(t, 4)
	c := cfg(srv, 4)
	c.Model = "nomic-embed-text"
	if got := mustNew(t, c).Model(); got != "openai:nomic-embed-text" {
		t.Fatalf("Model %q", got)
	}
}

func TestConfigValidation(t *testing.T) {
	ok := Config{BaseURL: "http://localhost:1/v1", Model: "m", Dim: 4}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"no url", func(c *Config) { c.BaseURL = "" }, "BaseURL"},
		{"relative url", func(c *Config) { c.BaseURL = "localhost:11434/v1" }, "BaseURL"},
		{"bad scheme", func(c *Config) { c.BaseURL = "ftp://host/v1" }, "BaseURL"},
		{"no model", func(c *Config) { c.Model = " " }, "Model"},
		{"negative dim", func(c *Config) { c.Dim = -1 }, "Dim"},
		{"negative batch", func(c *Config) { c.BatchSize = -1 }, "BatchSize"},
		{"negative batch bytes", func(c *Config) { c.BatchBytes = -1 }, "BatchBytes"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "Timeout"},
		{"negative backoff", func(c *Config) { c.Backoff = -time.Second }, "Backoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			_, err := NewEmbedder(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), "Config."+tc.field) {
				t.Fatalf("err %v, want one naming Config.%s", err, tc.field)
			}
		})
	}

	t.Run("password not echoed", func(t *testing.T) {
		c := ok
		c.BaseURL = "localhost:hunter2@x"
		if _, err := NewEmbedder(context.Background(), c); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("defaults", func(t *testing.T) {
		e := mustNew(t, ok)
		if e.batch != DefaultBatchSize || e.batchBytes != DefaultBatchBytes || e.cache == nil || e.retries != DefaultMaxRetries || e.backoff != DefaultBackoff {
			t.Fatalf("defaults not applied: %+v", e)
		}
		c := ok
		c.MaxRetries = -1
		if e := mustNew(t, c); e.retries != 0 {
			t.Fatalf("MaxRetries -1 gave %d retries", e.retries)
		}
	})
}

func TestDelay(t *testing.T) {
	e := &Embedder{backoff: 100 * time.Millisecond, maxBackoff: time.Second}
	for attempt, want := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
		want *= time.Millisecond
		for range 50 {
			d := e.delay(attempt)
			if d < want/2 || d > want {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
	if d := e.delay(1000); d > time.Second {
		t.Fatalf("delay overflowed the cap: %v", d)
	}
}
