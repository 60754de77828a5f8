package httpapi

import (
	"context"
	"net"
	"testing"
	"time"
)

// Shutdown called from another goroutine as Serve begins (a server stopped
// right after it started) ends Serve, whichever of the two runs first, and
// without a data race (go test -race).
func TestShutdownRightAfterServe(t *testing.T) {
	srv := testServer(t)
	for range 20 {
		s := New(srv.svc, srv.opts)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- s.Serve(ln) }()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("Serve = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve still runs after Shutdown")
		}
	}
}
