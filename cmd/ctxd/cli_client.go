package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/ctxd/ctxd/client"
)

// dialTimeout bounds connecting: an address that drops packets should say
// "unreachable" in seconds, not after the whole request timeout.
const dialTimeout = 5 * time.Second

// newAPIClient is the client the CLI verbs and `export --server` use.
func newAPIClient(server, key string, timeout time.Duration) (*client.Client, error) {
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
	c, err := client.New(server, client.WithAPIKey(key), client.WithTimeout(timeout),
		client.WithHTTPClient(&http.Client{Transport: tr}), client.WithUserAgent("ctxd-cli"))
	if err != nil {
		return nil, usageErrorf("--server: %v", err)
	}
	return c, nil
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

// hintError is an API error with what the user can do about it.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + ": " + e.hint }

func (e *hintError) Unwrap() error { return e.err }

// explain words a client error for the person at the terminal: no answer
// says whether the server is up, an authentication failure what to pass.
func explain(err error, c *client.Client, timeout time.Duration) error {
	var te *client.TransportError
	var ce *client.Error
	switch {
	case errors.As(err, &te):
		ue := &unreachableError{URL: c.BaseURL(), Err: err}
		if errors.Is(err, context.DeadlineExceeded) {
			ue.Timeout = timeout
		}
		return ue
	case errors.As(err, &ce) && ce.Status == http.StatusUnauthorized:
		return &hintError{err: err, hint: "pass --api-key or set CTXD_API_KEY"}
	case errors.As(err, &ce) && ce.Status == http.StatusForbidden:
		return &hintError{err: err, hint: "this API key may not do that; use a key with access"}
	}
	return err
}

// listPageSize is the page size listings are fetched with: the API's largest.
// Tests lower it to make a few items span pages.
var listPageSize = 1000

// collect gathers up to limit items (0: all) of a listing.
func collect[T any](items iter.Seq2[T, error], limit int) ([]T, error) {
	all := []T{}
	for it, err := range items {
		if err != nil {
			return nil, err
		}
		all = append(all, it)
		if limit > 0 && len(all) >= limit {
			break
		}
	}
	return all, nil
}

// pageSize is the page to fetch a listing of up to limit items (0: all) with.
func pageSize(limit int) int {
	if limit > 0 {
		return min(listPageSize, limit)
	}
	return listPageSize
}
