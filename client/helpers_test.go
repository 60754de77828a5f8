package client_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

// startServer runs the real server for t (servertest) and returns its URL.
func startServer(t testing.TB, mutate ...func(*server.Config)) string {
	t.Helper()
	url, _ := servertest.Start(t, t.TempDir(), mutate...)
	return url
}

// exampleServer runs the real server for an example, on a temporary
// directory, and returns its URL and how to stop it.
func exampleServer() (string, func()) {
	dir, err := os.MkdirTemp("", "ctxd-client-example-")
	if err != nil {
		panic(err)
	}
	m, err := servertest.Run(context.Background(), servertest.Config(dir))
	if err != nil {
		panic(err)
	}
	return "http://" + m.Addr.String(), func() {
		if err := errors.Join(m.Close(), os.RemoveAll(dir)); err != nil {
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
