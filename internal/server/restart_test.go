package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
)

// PostgreSQL restarted under load: while it is down, writes answer 503
// with Retry-After (never a 500), the node reconnects by itself once it is
// back, and every write it acknowledged, before, during or after, is
// stored.
func TestDatabaseRestartUnderLoad(t *testing.T) {
	dsn := pgtest.DSN(t)
	url, m := servertest.Start(t, t.TempDir(), func(c *server.Config) { c.Store = dsn })
	var (
		mu       sync.Mutex
		acked    []string
		statuses = map[int]int{}
		noRetry  int // 503s without Retry-After
	)
	// Each answer's status, and whether its request was sent after the
	// restart, for the phases below to wait on.
	type answer struct {
		code  int
		after bool
	}
	answers := make(chan answer, 4096)
	var back atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				after := back.Load()
				body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("writer %d, note %d: the barge passes the lock", w, i)}}})
				res, err := http.Post(fmt.Sprintf("%s/v1/sessions/load-%d/messages", url, w), "application/json", bytes.NewReader(body))
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				var out struct{ IDs []string }
				_ = json.NewDecoder(res.Body).Decode(&out)
				res.Body.Close()
				mu.Lock()
				statuses[res.StatusCode]++
				switch res.StatusCode {
				case http.StatusCreated:
					acked = append(acked, out.IDs...)
				case http.StatusServiceUnavailable:
					if res.Header.Get("Retry-After") == "" {
						noRetry++
					}
				}
				mu.Unlock()
				select {
				case answers <- answer{res.StatusCode, after}:
				default: // nobody waits on them any more
				}
			}
		}()
	}
	defer func() {
		if stop != nil {
			close(stop)
			wg.Wait()
		}
	}()
	// waitFor returns after n answers of status code (to requests sent
	// after the restart, with after).
	waitFor := func(code, n int, after bool) {
		t.Helper()
		for n > 0 {
			if a := <-answers; a.code == code && (a.after || !after) {
				n--
			}
		}
	}
	waitFor(http.StatusCreated, 20, false)
	pgtest.Stop(t)
	restarted := false
	defer func() {
		if !restarted {
			pgtest.Start(t)
		}
	}()
	waitFor(http.StatusServiceUnavailable, 4, false)
	pgtest.Start(t)
	restarted = true
	back.Store(true)
	waitFor(http.StatusCreated, 20, true)
	close(stop)
	wg.Wait()
	stop = nil
	mu.Lock()
	defer mu.Unlock()
	for code, n := range statuses {
		if code != http.StatusCreated && code != http.StatusServiceUnavailable {
			t.Errorf("%d answers %d: want only 201 and 503", n, code)
		}
	}
	if noRetry > 0 {
		t.Errorf("%d answers 503 without Retry-After", noRetry)
	}
	got, err := m.Store.MessagesByID(t.Context(), memory.DefaultTenant, acked, false)
	if err != nil || len(got) != len(acked) {
		t.Fatalf("%d of the %d acknowledged messages are stored (%v)", len(got), len(acked), err)
	}
	t.Logf("answers: %v; %d messages acknowledged, all stored", statuses, len(acked))
}
