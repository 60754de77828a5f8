// Package openai embeds text through any OpenAI-compatible embeddings endpoint
// (OpenAI, Ollama, vLLM, llama.cpp server) with github.com/sashabaranov/go-openai.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ctxd/ctxd/memory"
	goopenai "github.com/sashabaranov/go-openai"
)

// Defaults applied to zero Config fields.
const (
	// DefaultBatchSize and DefaultBatchBytes: the texts of one write go
	// in one request (a write is at most memory.MaxBatch messages; the bench
	// and agents write 1 to 100), within OpenAI's limits of 2,048 inputs and
	// 300,000 tokens a request (512 KiB is about 130,000 to 170,000 tokens
	// of prose or code). A request costs its round trip: at 64 texts, a write
	// of 100 paid two.
	DefaultBatchSize  = 256
	DefaultBatchBytes = 512 << 10
	// DefaultCacheSize is how many texts' vectors are kept (see cache.go):
	// 6 MB at 1,536 dimensions.
	DefaultCacheSize  = 1024
	DefaultTimeout    = 30 * time.Second
	DefaultMaxRetries = 3
	DefaultBackoff    = 200 * time.Millisecond
	// DefaultMaxBackoff caps the doubling backoff, so a long outage costs a
	// bounded wait per retry rather than minutes. A Config.Backoff above it
	// raises the cap to Config.Backoff.
	DefaultMaxBackoff = 5 * time.Second
)

// ModelPrefix starts every Model() name, so vectors from this embedder are
// never mixed with the built-in model's even when the names coincide.
const ModelPrefix = "openai:"

// probeText is embedded once at start-up to learn the dimension when
// Config.Dim is 0.
const probeText = "dimension probe"

// maxErrLen bounds the upstream detail kept in error messages: servers may
// answer with whole HTML pages, and the message ends up in logs and responses.
const maxErrLen = 300

// Config says where and how to embed.
type Config struct {
	// BaseURL is the API root the "/embeddings" path is appended to, e.g.
	// "https://api.openai.com/v1" or "http://localhost:11434/v1". Required:
	// there is no default, so text is never sent to a third party by accident.
	BaseURL string
	// Model is the server's model name, e.g. "text-embedding-3-small".
	Model string
	// APIKey is sent as a bearer token; empty sends no Authorization header.
	APIKey string
	// Dim is the vector length. 0: ask the endpoint once in NewEmbedder.
	Dim int
	// BatchSize is the most texts sent in one request (0: DefaultBatchSize).
	BatchSize int
	// BatchBytes is the most bytes of text sent in one request (0:
	// DefaultBatchBytes); a longer text goes alone.
	BatchBytes int
	// CacheSize is how many recent texts' vectors are kept and answered
	// without a request (0: DefaultCacheSize; negative: none). See cache.go.
	CacheSize int
	// Timeout bounds each HTTP attempt, not the whole Embed call
	// (0: DefaultTimeout).
	Timeout time.Duration
	// MaxRetries is how many times a transient failure is retried
	// (0: DefaultMaxRetries; negative: never retry).
	MaxRetries int
	// Backoff is the wait before the first retry; it doubles each retry, with
	// jitter, up to max(DefaultMaxBackoff, Backoff) (0: DefaultBackoff).
	Backoff time.Duration
}

// Embedder implements memory.Embedder over an OpenAI-compatible endpoint. It
// is immutable after NewEmbedder and safe for concurrent use.
type Embedder struct {
	client     *goopenai.Client
	model      string
	dim        int
	batch      int
	batchBytes int
	cache      *vectorCache // nil: none
	retries    int
	backoff    time.Duration
	maxBackoff time.Duration
	apiKey     string // only to scrub it from error messages
	endpoint   string // BaseURL with any password redacted, for messages
}

var _ memory.Embedder = (*Embedder)(nil)

// NewEmbedder validates cfg and builds the client. When cfg.Dim is 0 it embeds
// a short text to learn the dimension, so an unreachable endpoint fails here,
// at start-up, with an error naming the URL.
func NewEmbedder(ctx context.Context, cfg Config) (*Embedder, error) {
	cfg, u, err := cfg.normalise()
	if err != nil {
		return nil, err
	}

	cc := goopenai.DefaultConfig(cfg.APIKey)
	cc.BaseURL = cfg.BaseURL
	// The default transport keeps 2 idle connections per host; concurrent
	// Embed calls to one local server would otherwise keep reconnecting.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	// go-openai's default http.Client has no timeout: a hung server would
	// hang every writer.
	cc.HTTPClient = &http.Client{Timeout: cfg.Timeout, Transport: tr}

	e := &Embedder{
		client:     goopenai.NewClientWithConfig(cc),
		model:      cfg.Model,
		dim:        cfg.Dim,
		batch:      cfg.BatchSize,
		batchBytes: cfg.BatchBytes,
		cache:      newVectorCache(cfg.CacheSize),
		retries:    cfg.MaxRetries,
		backoff:    cfg.Backoff,
		maxBackoff: max(DefaultMaxBackoff, cfg.Backoff),
		apiKey:     cfg.APIKey,
		endpoint:   u.Redacted(),
	}
	if e.dim == 0 {
		vecs, err := e.embedBatch(ctx, []string{probeText}, 0)
		if err != nil {
			return nil, e.probeError(err)
		}
		e.dim = len(vecs[0])
	}
	return e, nil
}

// normalise applies defaults and rejects values that cannot work, naming the
// field so a bad flag or env var is easy to find.
func (c Config) normalise() (Config, *url.URL, error) {
	if c.BaseURL == "" {
		return c, nil, errors.New("openai embedder: Config.BaseURL is empty (e.g. https://api.openai.com/v1 or http://localhost:11434/v1)")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Not %q of BaseURL: it may carry credentials.
		return c, nil, errors.New("openai embedder: Config.BaseURL must be an absolute http:// or https:// URL")
	}
	if strings.TrimSpace(c.Model) == "" {
		return c, nil, errors.New("openai embedder: Config.Model is empty")
	}
	if c.Dim < 0 {
		return c, nil, fmt.Errorf("openai embedder: Config.Dim is %d, want >= 0 (0: ask the endpoint)", c.Dim)
	}
	if c.BatchSize < 0 {
		return c, nil, fmt.Errorf("openai embedder: Config.BatchSize is %d, want >= 0 (0: default %d)", c.BatchSize, DefaultBatchSize)
	}
	if c.Timeout < 0 {
		return c, nil, fmt.Errorf("openai embedder: Config.Timeout is %v, want >= 0 (0: default %v)", c.Timeout, DefaultTimeout)
	}
	if c.Backoff < 0 {
		return c, nil, fmt.Errorf("openai embedder: Config.Backoff is %v, want >= 0 (0: default %v)", c.Backoff, DefaultBackoff)
	}
	if c.BatchBytes < 0 {
		return c, nil, fmt.Errorf("openai embedder: Config.BatchBytes is %d, want >= 0 (0: default %d)", c.BatchBytes, DefaultBatchBytes)
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	return c, u, nil
}

// Model names the model with ModelPrefix, e.g. "openai:nomic-embed-text".
func (e *Embedder) Model() string { return ModelPrefix + e.model }

// Dim is the length of every vector Embed returns.
func (e *Embedder) Dim() int { return e.dim }

// Embed returns one L2-normalised vector per text, in order. A text the
// cache holds, or that came earlier in texts, is not sent; the rest go in
// batches of at most BatchSize texts and BatchBytes bytes. Batches go out
// one after another: local servers run them one at a time anyway, and a
// failure stops the call before more work is wasted.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	first := make(map[string]int, len(texts)) // a text's first index
	var send []int                            // indexes of the texts to send
	for i, t := range texts {
		if _, ok := first[t]; ok {
			continue // a copy of the first's vector, below
		}
		first[t] = i
		if v := e.cache.get(t); v != nil {
			out[i] = v
			continue
		}
		send = append(send, i)
	}
	for len(send) > 0 {
		n, size := 0, 0
		for n < len(send) && n < e.batch && (n == 0 || size+len(texts[send[n]]) <= e.batchBytes) {
			size += len(texts[send[n]])
			n++
		}
		batch := make([]string, n)
		for j, i := range send[:n] {
			batch[j] = texts[i]
		}
		vecs, err := e.embedBatch(ctx, batch, e.dim)
		if err != nil {
			return nil, err
		}
		for j, i := range send[:n] {
			out[i] = vecs[j]
			e.cache.add(texts[i], vecs[j])
		}
		send = send[n:]
	}
	for i, t := range texts {
		if j := first[t]; j != i {
			out[i] = slices.Clone(out[j]) // callers own their vectors
		}
	}
	return out, nil
}

// embedBatch sends one request (with retries) and checks the answer. dim 0
// accepts any non-zero length (the probe).
func (e *Embedder) embedBatch(ctx context.Context, texts []string, dim int) ([][]float32, error) {
	inputs := make([]string, len(texts))
	for i, t := range texts {
		// Some servers (OpenAI among them) reject "" with a 400, which would
		// fail the whole batch; a space embeds as "nothing" just as well.
		if t == "" {
			t = " "
		}
		inputs[i] = t
	}
	// EncodingFormat stays empty (float): servers that ignore the field
	// answer with float arrays, which go-openai could not read as base64.
	req := goopenai.EmbeddingRequestStrings{Input: inputs, Model: goopenai.EmbeddingModel(e.model)}
	resp, err := e.create(ctx, req)
	if err != nil {
		return nil, err
	}

	if len(resp.Data) != len(texts) {
		return nil, fmt.Errorf("openai embedder: endpoint returned %d embeddings for %d inputs", len(resp.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		// Servers are not required to answer in input order; index is the
		// only link between an input and its vector.
		if d.Index < 0 || d.Index >= len(texts) {
			return nil, fmt.Errorf("openai embedder: endpoint returned embedding index %d for %d inputs", d.Index, len(texts))
		}
		if out[d.Index] != nil {
			return nil, fmt.Errorf("openai embedder: endpoint returned embedding index %d twice", d.Index)
		}
		v := d.Embedding
		switch {
		case len(v) == 0:
			return nil, fmt.Errorf("openai embedder: endpoint returned an empty embedding for input %d", d.Index)
		case dim > 0 && len(v) != dim:
			return nil, fmt.Errorf("openai embedder: model %q returned %d dimensions, want %d (Config.Dim, or the dimension this data was embedded with)", e.model, len(v), dim)
		}
		if err := normalise(v); err != nil {
			return nil, fmt.Errorf("openai embedder: embedding for input %d: %w", d.Index, err)
		}
		out[d.Index] = v
	}
	return out, nil
}

// create calls the endpoint, retrying transient failures.
func (e *Embedder) create(ctx context.Context, req goopenai.EmbeddingRequestStrings) (goopenai.EmbeddingResponse, error) {
	for attempt := 0; ; attempt++ {
		resp, err := e.client.CreateEmbeddings(ctx, req)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return resp, e.ctxError(ctx, err)
		}
		if !retryable(err) || attempt >= e.retries {
			return resp, e.failure(err, attempt+1)
		}
		t := time.NewTimer(e.delay(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, e.ctxError(ctx, err)
		case <-t.C:
		}
	}
}

// delay is the wait before retry attempt+1: doubling from Backoff, capped,
// with "equal jitter" (a random point in the upper half) so that many writers
// failing together do not retry in lockstep.
func (e *Embedder) delay(attempt int) time.Duration {
	d := e.backoff
	for range attempt {
		d *= 2
		if d >= e.maxBackoff {
			d = e.maxBackoff
			break
		}
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// retryable reports whether err is worth another attempt: HTTP 429 and 5xx,
// and transport failures (refused, reset, timed out, cut-off body). Other 4xx
// answers will not change on retry.
func retryable(err error) bool {
	if code := statusCode(err); code != 0 {
		return code == http.StatusTooManyRequests || code >= 500
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return false // a 200 with a body that is not an embeddings response
	}
	return true
}

// statusCode is the HTTP status of an error answer, or 0 if there was none.
func statusCode(err error) int {
	var apiErr *goopenai.APIError
	if errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0 {
		return apiErr.HTTPStatusCode
	}
	var reqErr *goopenai.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.HTTPStatusCode
	}
	return 0
}

// failure turns the last error of a request into what callers see: the
// endpoint being down, overloaded or slow is EUNAVAILABLE (503: try later);
// a refusal (4xx other than 429) or a malformed answer is a configuration
// problem: an internal error.
func (e *Embedder) failure(err error, attempts int) error {
	detail := e.describe(err)
	if attempts > 1 {
		detail = fmt.Sprintf("%s (after %d attempts)", detail, attempts)
	}
	if retryable(err) {
		return &codedError{memory.Errorf(memory.EUNAVAILABLE, "embedding endpoint unavailable: %s", detail), err}
	}
	if code := statusCode(err); code == http.StatusNotFound {
		detail += " (does Config.BaseURL need a /v1 suffix, and is the model name right?)"
	}
	// Not a *memory.Error: the HTTP layer then logs this and tells the client
	// only "internal error", and an upstream 401 body (OpenAI echoes part of
	// the key) does not reach API clients.
	return &wrapError{"openai embedder: endpoint refused the request: " + detail, err}
}

// ctxError reports a request cut short by ctx. It keeps ctx.Err() in the
// chain so callers can tell a client that went away (context.Canceled) from a
// dead endpoint, while the code still maps to 503.
func (e *Embedder) ctxError(ctx context.Context, last error) error {
	cause := ctx.Err()
	msg := "embedding request cancelled"
	if errors.Is(cause, context.DeadlineExceeded) {
		msg = "embedding endpoint did not answer before the deadline"
	}
	if last != nil && !errors.Is(last, cause) {
		msg += "; last error: " + e.describe(last)
	}
	return &codedError{memory.Errorf(memory.EUNAVAILABLE, "%s", msg), cause}
}

// probeError names the URL: at start-up the operator must see which endpoint
// (from which setting) failed.
func (e *Embedder) probeError(err error) error {
	var ce *codedError
	if errors.As(err, &ce) {
		return &codedError{memory.Errorf(ce.domain.Code, "openai embedder: probing %s with model %q failed: %s", e.endpoint, e.model, ce.domain.Message), ce.cause}
	}
	return &wrapError{fmt.Sprintf("openai embedder: probing %s with model %q failed: %s", e.endpoint, e.model, strings.TrimPrefix(err.Error(), "openai embedder: ")), err}
}

// describe is a short, single-line, key-free account of err for messages.
func (e *Embedder) describe(err error) string {
	var s string
	var apiErr *goopenai.APIError
	var reqErr *goopenai.RequestError
	var urlErr *url.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0:
		s = fmt.Sprintf("HTTP %d: %s", apiErr.HTTPStatusCode, apiErr.Message)
	case errors.As(err, &reqErr):
		s = fmt.Sprintf("HTTP %d: %s", reqErr.HTTPStatusCode, reqErr.Body)
	case errors.As(err, &urlErr):
		// The URL is the same on every request; the message names it once at
		// start-up, and repeating it here would only lengthen every log line.
		s = urlErr.Err.Error()
		if urlErr.Timeout() {
			s = "timed out: " + s
		}
	default:
		s = err.Error()
	}
	return e.scrub(s)
}

// scrub removes the API key (a server may echo it back in an error body),
// flattens whitespace and bounds the length.
func (e *Embedder) scrub(s string) string {
	if e.apiKey != "" {
		s = strings.ReplaceAll(s, e.apiKey, "[redacted]")
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxErrLen {
		cut := maxErrLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// codedError is a *memory.Error that also unwraps to its cause, so errors.Is
// still finds context.Canceled or a net error underneath the domain code.
type codedError struct {
	domain *memory.Error
	cause  error
}

func (e *codedError) Error() string   { return e.domain.Error() }
func (e *codedError) Unwrap() []error { return []error{e.domain, e.cause} }

// wrapError keeps the cause for errors.Is/As but shows only msg, which is
// scrubbed: go-openai's own texts carry whole response bodies.
type wrapError struct {
	msg   string
	cause error
}

func (e *wrapError) Error() string { return e.msg }
func (e *wrapError) Unwrap() error { return e.cause }

// normalise scales v to unit length in place. A zero vector is left as it
// is: it has no direction to keep, and refusing it would make its message
// impossible to store; it simply scores 0 against everything.
func normalise(v []float32) error {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if math.IsNaN(sum) || math.IsInf(sum, 0) {
		return errors.New("non-finite values")
	}
	if sum == 0 {
		return nil
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return nil
}
