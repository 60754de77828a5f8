// Package servertest runs the real ctxd server (internal/server: bbolt,
// Bleve, GloVe, tiktoken, event log, cold store, HTTP) on 127.0.0.1:0 for
// tests and examples of other packages.
package servertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/server"
)

// Config is `ctxd serve`'s defaults on dir, logging warnings only, with no
// rate limit: every test client is 127.0.0.1, and a test that sends more
// than --rate-burst requests would see 429s once it runs faster than the
// race detector lets it. The limiter's own tests turn it on. Its clock
// starts at Epoch, so that no test result depends on the day it runs.
func Config(dir string) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.LogLevel = "warn"
	cfg.RateLimit = 0
	cfg.Clock = Clock(Epoch)
	return cfg
}

// Epoch is the date every test server's clock starts at: a Wednesday
// morning in UTC, chosen so that no weekday, month or date word of a test's
// own text is the day's.
var Epoch = time.Date(2025, time.January, 15, 9, 30, 0, 0, time.UTC)

// Clock is a clock that reads start when first read and then advances with
// the real clock (so that durations, timeouts and ordering behave as they do
// in production) without ever reading today's date.
func Clock(start time.Time) func() time.Time {
	var once sync.Once
	var origin time.Time
	return func() time.Time {
		once.Do(func() { origin = time.Now() })
		return start.Add(time.Since(origin))
	}
}

// Run starts a server of cfg on 127.0.0.1:0; the caller closes it.
func Run(ctx context.Context, cfg server.Config) (*server.Main, error) {
	return server.RunLocal(ctx, cfg)
}

// Start runs a server on dir (Config, then each mutate) for tb, closed when
// tb ends, and returns its URL.
func Start(tb testing.TB, dir string, mutate ...func(*server.Config)) (string, *server.Main) {
	tb.Helper()
	cfg := Config(dir)
	for _, f := range mutate {
		f(&cfg)
	}
	m, err := Run(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("start server: %v", err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("close server: %v", err)
		}
	})
	return "http://" + m.Addr.String(), m
}
