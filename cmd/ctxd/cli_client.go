package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// apiClient speaks the ctxd HTTP API for the CLI verbs. It hands back the
// server's JSON as it came, so --json prints exactly what the server said.
type apiClient struct {
	base    string // scheme://host[:port][/prefix], no trailing slash
	key     string
	timeout time.Duration
	http    *http.Client
}

// dialTimeout bounds connecting: an address that drops packets should say
// "unreachable" in seconds, not after the whole request timeout.
const dialTimeout = 5 * time.Second

func newAPIClient(server, key string, timeout time.Duration) (*apiClient, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("--server %q: want a URL like http://127.0.0.1:8080", server)
	}
	if timeout <= 0 {
		return nil, usageErrorf("--timeout %s: want a positive duration like 30s", timeout)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: dialTimeout}).DialContext
	tr.Proxy = nil // the server is usually on loopback; a proxy would only be in the way
	return &apiClient{base: strings.TrimRight(server, "/"), key: key, timeout: timeout,
		http: &http.Client{Timeout: timeout, Transport: tr}}, nil
}

// apiError is a non-2xx answer, in the API's error shape when the server
// gave one.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%s (%s, HTTP %d)", e.Message, e.Code, e.Status)
	switch e.Status {
	case http.StatusUnauthorized:
		msg += ": pass --api-key or set CTXD_API_KEY"
	case http.StatusForbidden:
		msg += ": this API key may not do that; use a key with access"
	}
	return msg
}

// unreachableError is a request that got no HTTP answer.
type unreachableError struct {
	URL     string
	Timeout time.Duration // set when the server connected but did not answer in time
	Err     error
}

func (e *unreachableError) Error() string {
	if e.Timeout > 0 {
		return fmt.Sprintf("ctxd at %s did not answer within %s: raise --timeout or check the server's load (%v)", e.URL, e.Timeout, e.Err)
	}
	return fmt.Sprintf("cannot reach ctxd at %s: is `ctxd serve` running? set --server or CTXD_SERVER (%v)", e.URL, e.Err)
}

func (e *unreachableError) Unwrap() error { return e.Err }

// call sends a request with an optional JSON body and returns the answer's
// body when the status is 2xx.
func (c *apiClient) call(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		js, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request to %s: %w", path, err)
		}
		rd = bytes.NewReader(js)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, usageErrorf("build request %s %s: %v", method, u, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, &unreachableError{URL: c.base, Err: fmt.Errorf("read answer to %s %s: %w", method, path, err)}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return nil, decodeAPIError(res.StatusCode, raw)
	}
	return raw, nil
}

func (c *apiClient) transportError(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !isDialError(err) {
		return &unreachableError{URL: c.base, Timeout: c.timeout, Err: err}
	}
	return &unreachableError{URL: c.base, Err: err}
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// decodeAPIError reads the API's {"error": {"code", "message"}}; anything
// else (a proxy's HTML page) is quoted as it is.
func decodeAPIError(status int, raw []byte) *apiError {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &body); err == nil && body.Error.Code != "" {
		return &apiError{Status: status, Code: body.Error.Code, Message: body.Error.Message}
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return &apiError{Status: status, Code: "http_" + fmt.Sprint(status), Message: "unexpected answer: " + text}
}

// get fetches path and decodes the answer into out (when not nil); it
// returns the raw answer too.
func (c *apiClient) get(ctx context.Context, path string, query url.Values, out any) ([]byte, error) {
	return c.decoded(ctx, http.MethodGet, path, query, nil, out)
}

// post sends body to path and decodes the answer into out (when not nil).
func (c *apiClient) post(ctx context.Context, path string, body, out any) ([]byte, error) {
	return c.decoded(ctx, http.MethodPost, path, nil, body, out)
}

func (c *apiClient) decoded(ctx context.Context, method, path string, query url.Values, body, out any) ([]byte, error) {
	raw, err := c.call(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("decode answer to %s %s: %w", method, path, err)
		}
	}
	return raw, nil
}

// listPageSize is the page size listings are fetched with: the API's largest.
// Tests lower it to make a few items span pages.
var listPageSize = 1000

// pages fetches every page of a listing (limit/cursor/next_cursor), up to
// limit items (0: all), and returns the items under key.
func (c *apiClient) pages(ctx context.Context, path, key string, query url.Values, limit int) ([]json.RawMessage, error) {
	all := []json.RawMessage{}
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	cursor := ""
	for {
		page := listPageSize
		if limit > 0 {
			page = min(page, limit-len(all))
		}
		q.Set("limit", fmt.Sprint(page))
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var body map[string]json.RawMessage
		if _, err := c.get(ctx, path, q, &body); err != nil {
			return nil, err
		}
		var items []json.RawMessage
		if err := json.Unmarshal(body[key], &items); err != nil {
			return nil, fmt.Errorf("decode %s of %s: %w", key, path, err)
		}
		all = append(all, items...)
		if err := json.Unmarshal(body["next_cursor"], &cursor); err != nil || cursor == "" || (limit > 0 && len(all) >= limit) {
			return all, nil
		}
	}
}

// sessionPath is /v1/sessions/ID plus more path segments, each escaped.
func sessionPath(id string, more ...string) string {
	p := "/v1/sessions/" + url.PathEscape(id)
	for _, s := range more {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// stream sends a GET and hands back the answer's body, to read as it comes.
// The client's timeout bounds only the wait for the answer to begin: a
// streamed export takes as long as the store is large. The caller closes
// the body.
func (c *apiClient) stream(ctx context.Context, path string, query url.Values) (io.ReadCloser, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, usageErrorf("build request GET %s: %v", u, err)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	hc := *c.http
	hc.Timeout = 0
	var fired atomic.Bool
	timer := time.AfterFunc(c.timeout, func() { fired.Store(true); cancel() })
	res, err := hc.Do(req)
	// Should the timer fire just after the answer began, reading the body
	// fails and the reader of the export reports it: nothing is lost.
	timer.Stop()
	if err != nil {
		cancel()
		if fired.Load() {
			return nil, &unreachableError{URL: c.base, Timeout: c.timeout, Err: err}
		}
		return nil, c.transportError(err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		defer cancel()
		defer res.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return nil, decodeAPIError(res.StatusCode, raw)
	}
	return &cancelBody{ReadCloser: res.Body, cancel: cancel}, nil
}

// cancelBody releases the request's context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
