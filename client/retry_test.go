package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/memory"
)

// flaky is a front of the real server that answers the next failures
// requests with status (and Retry-After when set) before passing requests on.
type flaky struct {
	mu         sync.Mutex
	failures   int
	status     int
	retryAfter string
	seen       []string // method and path of every request, failed or not
	failed     chan struct{}
}

func (f *flaky) fail(n, status int, retryAfter string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures, f.status, f.retryAfter, f.seen = n, status, retryAfter, nil
	for len(f.failed) > 0 {
		<-f.failed // the signals of the failures before
	}
}

func (f *flaky) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

func startFlaky(t *testing.T) (*flaky, string) {
	t.Helper()
	target, err := url.Parse(startServer(t))
	if err != nil {
		t.Fatal(err)
	}
	f := &flaky{failed: make(chan struct{}, 100)}
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, r.Method+" "+r.URL.Path)
		fail := f.failures > 0
		if fail {
			f.failures--
		}
		status, retryAfter := f.status, f.retryAfter
		f.mu.Unlock()
		if !fail {
			proxy.ServeHTTP(w, r)
			return
		}
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"busy, try again"}}`))
		f.failed <- struct{}{}
	}))
	t.Cleanup(front.Close)
	return f, front.URL
}

// Only requests that are safe to send twice are retried after a 503: a
// read, or a write with an idempotency key; a 429 is retried whatever the
// request, as the rate limit refuses before any work.
func TestRetry(t *testing.T) {
	f, url := startFlaky(t)
	c := newClient(t, url, client.WithRetries(3, time.Millisecond))
	ctx := t.Context()
	if _, err := c.Append(ctx, "r", []api.MessageIn{user("hello")}); err != nil {
		t.Fatal(err)
	}

	f.fail(1, http.StatusServiceUnavailable, "")
	if st, err := c.Session(ctx, "r"); err != nil || st.ID != "r" || f.requests() != 2 {
		t.Fatalf("GET after one 503 = %+v, %v, after %d requests", st, err, f.requests())
	}

	f.fail(1, http.StatusServiceUnavailable, "")
	_, err := c.Append(ctx, "r", []api.MessageIn{user("not retried")})
	wantCode(t, err, http.StatusServiceUnavailable, memory.EUNAVAILABLE)
	if f.requests() != 1 {
		t.Fatalf("a write without a key was sent %d times", f.requests())
	}

	f.fail(1, http.StatusServiceUnavailable, "")
	first, err := c.AppendIdempotent(ctx, "r", "turn-2", []api.MessageIn{user("retried")})
	if err != nil || f.requests() != 2 {
		t.Fatalf("keyed write after one 503 = %v, after %d requests", err, f.requests())
	}
	again, err := c.AppendIdempotent(ctx, "r", "turn-2", []api.MessageIn{user("retried")})
	if err != nil || again.IDs[0] != first.IDs[0] {
		t.Fatalf("the same key again = %+v, %v; want the first answer's ids %v", again, err, first.IDs)
	}

	f.fail(1, http.StatusTooManyRequests, "0")
	if _, err := c.Compact(ctx, "r", api.CompactIn{DryRun: true}); err != nil || f.requests() != 2 {
		t.Fatalf("POST after one 429 = %v, after %d requests", err, f.requests())
	}

	f.fail(10, http.StatusServiceUnavailable, "")
	_, err = c.Session(ctx, "r")
	wantCode(t, err, http.StatusServiceUnavailable, memory.EUNAVAILABLE)
	if f.requests() != 4 {
		t.Fatalf("3 retries sent %d requests", f.requests())
	}
}

// A Retry-After longer than the client waits is answered with the error at
// once, carrying the server's Retry-After; a cancelled context ends the
// wait between attempts.
func TestRetryAfter(t *testing.T) {
	f, url := startFlaky(t)
	c := newClient(t, url, client.WithRetries(3, time.Hour))
	f.fail(1, http.StatusServiceUnavailable, "3600")
	_, err := c.Session(t.Context(), "r")
	wantCode(t, err, http.StatusServiceUnavailable, memory.EUNAVAILABLE)
	if ce := err.(*client.Error); ce.RetryAfter != time.Hour || f.requests() != 1 {
		t.Fatalf("RetryAfter = %v after %d requests", ce.RetryAfter, f.requests())
	}

	f.fail(1, http.StatusServiceUnavailable, "")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := c.Session(ctx, "r"); done <- err }()
	// The client is about to wait an hour before its second attempt:
	// cancelling ends the wait with the answer it had (or, should it come
	// before the answer was read, the request).
	<-f.failed
	cancel()
	if err := <-done; memory.ErrorCode(err) != memory.EUNAVAILABLE && !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while waiting to retry: %v", err)
	}
}

// A request timeout bounds each attempt, and is not retried.
func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer slow.Close()
	defer close(release)
	c := newClient(t, slow.URL, client.WithTimeout(50*time.Millisecond), client.WithRetries(3, time.Millisecond))
	_, err := c.Session(t.Context(), "s")
	var te *client.TransportError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v (%T), want a TransportError for the deadline", err, err)
	}
}
