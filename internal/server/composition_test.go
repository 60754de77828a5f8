package server_test

import (
	"testing"

	"github.com/ctxd/ctxd/internal/server/servertest"
)

// The gateway's domain side is built where the server is composed and
// handed to HTTP: the model endpoints use that one, not one of their own.
func TestGatewayComposed(t *testing.T) {
	t.Parallel()
	_, m := servertest.Start(t, t.TempDir())
	if m.Gateway == nil || m.HTTP.Conversations() != m.Gateway {
		t.Fatalf("HTTP serves gateway %p, the composition built %p", m.HTTP.Conversations(), m.Gateway)
	}
}
