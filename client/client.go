// Package client is a typed Go client of the ctxd HTTP API.
//
// Requests and answers are the types the server itself decodes and encodes
// (package api, and memory's Status and CompactionReport), and a refusal
// comes back as the server's *memory.Error, so memory.ErrorCode(err) reads
// the same code on both sides of the wire:
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithAPIKey(os.Getenv("CTXD_API_KEY")))
//	if err != nil {
//		return err
//	}
//	_, err = c.Append(ctx, "demo", []api.MessageIn{{Role: "user", Content: "deploy the api to staging"}})
//	if err != nil {
//		return err
//	}
//	win, err := c.Context(ctx, "demo", api.ContextIn{Prompt: "what are we deploying?"})
//	switch {
//	case memory.ErrorCode(err) == memory.ENOTFOUND:
//		// no such session
//	case err != nil:
//		return err
//	}
//	// win.Messages can be sent to a chat model as they are.
//
// Every method takes a context, which bounds it with its retries. A request
// is retried only where that is safe: reads (GET, and search, which changes
// nothing), writes that carry an idempotency key or a message_id on every
// message, and any request answered 429 (the rate limit refuses before any
// work). Retries wait with exponential backoff, or as long as the server's
// Retry-After says.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
)

// Defaults of a Client.
const (
	DefaultTimeout   = 2 * time.Minute
	DefaultRetries   = 3
	DefaultBackoff   = 100 * time.Millisecond
	DefaultUserAgent = "ctxd-go-client"
	// MaxRetryWait caps one wait between attempts, Retry-After included: a
	// server asking for longer is answered with its error instead.
	MaxRetryWait = 30 * time.Second
)

// Client speaks the ctxd API. It is safe for concurrent use.
type Client struct {
	base      string // scheme://host[:port][/prefix], no trailing slash
	key       string
	tenant    string
	hc        *http.Client
	timeout   time.Duration
	userAgent string
	retries   int
	backoff   time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends key as a bearer token with every request.
func WithAPIKey(key string) Option { return func(c *Client) { c.key = key } }

// WithTenant acts as tenant (X-Ctxd-Tenant): only an admin key may name a
// tenant other than its own.
func WithTenant(tenant string) Option { return func(c *Client) { c.tenant = tenant } }

// WithHTTPClient sends requests with hc instead of http.DefaultClient; its
// own Timeout, if any, applies on top of WithTimeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTimeout bounds each attempt of a request, the answer's body included
// (DefaultTimeout; 0: no bound but the context's). For Export it bounds only
// the wait for the answer to begin: an export takes as long as the store is
// large.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithRetries sets how many times a request that is safe to retry is sent
// again after a 429, a 503 or no answer (DefaultRetries; 0: never), the
// first wait being backoff and each next one twice as long.
func WithRetries(n int, backoff time.Duration) Option {
	return func(c *Client) { c.retries, c.backoff = max(n, 0), backoff }
}

// New returns a client of the server at baseURL (http or https, optionally
// with a path prefix).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ctxd client: %q is not a URL like http://127.0.0.1:8080", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("ctxd client: %q: a base URL takes no query or fragment", baseURL)
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: http.DefaultClient, timeout: DefaultTimeout,
		userAgent: DefaultUserAgent, retries: DefaultRetries, backoff: DefaultBackoff}
	for _, o := range opts {
		o(c)
	}
	if c.timeout < 0 {
		return nil, fmt.Errorf("ctxd client: timeout %v is negative", c.timeout)
	}
	return c, nil
}

// BaseURL is the server's URL as given to New, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// Error is an answer other than 2xx. It wraps the server's *memory.Error
// (its code and message), so errors.As and memory.ErrorCode see the code.
// An answer that is not the API's error shape (a proxy's page) gets the code
// its status stands for and the body's start as its message.
type Error struct {
	Method, URL string
	Status      int
	Err         *memory.Error
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%s, HTTP %d)", e.Err.Message, e.Err.Code, e.Status)
}

func (e *Error) Unwrap() error { return e.Err }

// TransportError is a request that got no HTTP answer: the server is not
// running, the connection broke, or the timeout passed.
type TransportError struct {
	Method, URL string
	Err         error
}

func (e *TransportError) Error() string { return fmt.Sprintf("%s %s: %v", e.Method, e.URL, e.Err) }

func (e *TransportError) Unwrap() error { return e.Err }

// request is one call of the API.
type request struct {
	method, path string
	query        url.Values
	body         any // JSON-encoded when not nil
	header       http.Header
	// safe: sending it twice does no harm (a read, or a write the server
	// recognises as sent before), so it is retried after a 503 or no answer.
	safe bool
	// stream: the timeout bounds only the wait for the answer to begin.
	stream bool
	// gateway: a model call through the gateway. The API key goes in
	// X-Ctxd-Key (the provider's key keeps Authorization), and an answer
	// that ctxd relayed (it names the session) is the upstream's, returned
	// whatever its status.
	gateway bool
}

// do sends r and decodes a 2xx answer into out (when not nil).
func (c *Client) do(ctx context.Context, r request, out any) error {
	res, cancel, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer cancel()
	defer res.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, res.Body) // so the connection is reused
		return nil
	}
	dec := json.NewDecoder(res.Body)
	// Metadata numbers come back as json.Number, the exact digits stored:
	// a float64 would change a large integer.
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		// Not a TransportError: the server answered, with something else
		// than the API's shape (or the body was cut).
		return fmt.Errorf("decode answer to %s %s: %w", r.method, c.base+r.path, err)
	}
	return nil
}

// send sends r, with retries where safe, and returns a 2xx answer whose
// body the caller reads, then closes and cancels.
func (c *Client) send(ctx context.Context, r request) (*http.Response, context.CancelFunc, error) {
	var body []byte
	if r.body != nil {
		var err error
		if body, err = json.Marshal(r.body); err != nil {
			return nil, nil, fmt.Errorf("encode request %s %s: %w", r.method, r.path, err)
		}
	}
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	for attempt := 0; ; attempt++ {
		res, cancel, err := c.attempt(ctx, r, u, body)
		if err == nil {
			return res, cancel, nil
		}
		wait, retry := c.retryAfter(r, err, attempt)
		if !retry || ctx.Err() != nil {
			return nil, nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, err
		case <-t.C:
		}
	}
}

// retryAfter says whether err, the answer to attempt (0 the first), is
// worth another attempt, and after how long.
func (c *Client) retryAfter(r request, err error, attempt int) (time.Duration, bool) {
	if attempt >= c.retries {
		return 0, false
	}
	wait := min(c.backoff<<attempt, MaxRetryWait)
	var ae *Error
	switch {
	case errors.As(err, &ae):
		// A 429 is the rate limit, which refuses before any work: nothing
		// was done, whatever the request. A 503 may come after some.
		if ae.Status != http.StatusTooManyRequests && (ae.Status != http.StatusServiceUnavailable || !r.safe) {
			return 0, false
		}
		if ae.RetryAfter > 0 {
			if ae.RetryAfter > MaxRetryWait {
				return 0, false
			}
			wait = ae.RetryAfter
		}
		return wait, true
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return 0, false
	}
	var te *TransportError
	return wait, errors.As(err, &te) && r.safe
}

// attempt sends r once.
func (c *Client) attempt(ctx context.Context, r request, u string, body []byte) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithCancel(ctx)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("build request %s %s: %w", r.method, u, err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	switch {
	case c.key != "" && r.gateway:
		req.Header.Set(api.GatewayKeyHeader, c.key)
	case c.key != "":
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if c.tenant != "" {
		req.Header.Set(api.TenantHeader, c.tenant)
	}
	var timedOut atomic.Bool
	var timer *time.Timer
	if c.timeout > 0 {
		timer = time.AfterFunc(c.timeout, func() { timedOut.Store(true); cancel() })
	}
	res, err := c.hc.Do(req)
	if timer != nil && r.stream {
		// Should the timer fire just after the answer began, reading the
		// body fails and its reader reports it: nothing is lost.
		timer.Stop()
	}
	stop := func() {
		if timer != nil {
			timer.Stop()
		}
		cancel()
	}
	if err != nil {
		stop()
		if timedOut.Load() {
			// Not retried: each attempt would wait as long again.
			err = fmt.Errorf("no answer within %v: %w", c.timeout, context.DeadlineExceeded)
		}
		return nil, nil, &TransportError{Method: r.method, URL: u, Err: err}
	}
	if res.StatusCode/100 != 2 && !(r.gateway && res.Header.Get(api.GatewaySessionHeader) != "") {
		defer stop()
		defer res.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return nil, nil, decodeError(r.method, u, res, raw)
	}
	return res, stop, nil
}

// decodeError reads the API's {"error": {"code", "message"}}; anything
// else is quoted as it came.
func decodeError(method, u string, res *http.Response, raw []byte) *Error {
	e := &Error{Method: method, URL: u, Status: res.StatusCode, RetryAfter: retryAfterHeader(res.Header.Get("Retry-After"))}
	var body api.ErrorBody
	if err := json.Unmarshal(raw, &body); err == nil && body.Error.Code != "" {
		e.Err = &memory.Error{Code: body.Error.Code, Message: body.Error.Message}
		return e
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	if text == "" {
		text = http.StatusText(res.StatusCode)
	}
	e.Err = &memory.Error{Code: codeOfStatus(res.StatusCode), Message: "unexpected answer: " + text}
	return e
}

// codeOfStatus is the code a status stands for, for answers without the
// API's error body (a proxy's page).
func codeOfStatus(status int) string {
	if code := api.CodeOf(status); code != "" {
		return code
	}
	if status >= 500 {
		return memory.EINTERNAL
	}
	return memory.EINVALID
}

// retryAfterHeader reads Retry-After: seconds, or an HTTP date.
func retryAfterHeader(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// pathOf is the API path of segments, each escaped.
func pathOf(segments ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}
