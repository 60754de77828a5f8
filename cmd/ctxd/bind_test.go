package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/server"
)

// `ctxd serve` on a port in use fails before it creates, opens or indexes
// the data dir.
func TestServeBindsFirst(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := filepath.Join(t.TempDir(), "data")
	cfg := testConfig(dir)
	cfg.Addr = busy.Addr().String()
	m := server.NewMain(cfg)
	err = m.Run(context.Background(), nil)
	if err == nil {
		m.Close()
		t.Fatal("serve on a port in use started")
	}
	if !strings.Contains(err.Error(), "listen on "+cfg.Addr) {
		t.Errorf("error %q does not say the port is in use", err)
	}
	if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
		t.Errorf("the data dir was created before the bind failed: %v", statErr)
	}
}
