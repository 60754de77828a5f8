package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"testing"

	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/internal/ctxdtest"
	"github.com/ctxd/ctxd/memory"
)

// serve starts the real server (httpapi over a service on real adapters in
// dir) on 127.0.0.1:0 and returns its URL and how to stop it.
func serve(dir string, opts httpapi.Options) (string, func() error, error) {
	st, err := ctxdtest.Open(context.Background(), dir)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, errors.Join(err, st.Close())
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	srv := httpapi.New(st.Service, opts)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stop := func() error {
		err := srv.Shutdown(context.Background())
		return errors.Join(err, <-served, st.Close())
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// startServer is serve for a test, stopped when it ends.
func startServer(t testing.TB, opts httpapi.Options) string {
	t.Helper()
	url, stop, err := serve(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop server: %v", err)
		}
	})
	return url
}

// exampleServer is serve for an example, on a temporary directory.
func exampleServer() (string, func()) {
	dir, err := os.MkdirTemp("", "ctxd-client-example-")
	if err != nil {
		panic(err)
	}
	url, stop, err := serve(dir, httpapi.Options{})
	if err != nil {
		panic(err)
	}
	return url, func() {
		if err := errors.Join(stop(), os.RemoveAll(dir)); err != nil {
			panic(err)
		}
	}
}

func newClient(t testing.TB, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantCode fails t unless err is a *client.Error of status with code.
func wantCode(t testing.TB, err error, status int, code string) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != status {
		t.Fatalf("err = %v (%T), want HTTP %d", err, err, status)
	}
	if got := memory.ErrorCode(err); got != code {
		t.Fatalf("code = %q, want %q (%v)", got, code, err)
	}
}
