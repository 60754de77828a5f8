package main

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Shutdown (what SIGTERM runs) lets writes in flight finish: every write
// acknowledged before or during it is there after a restart.
func TestGracefulShutdownKeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	started := make(chan struct{})
	var once sync.Once
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				status, body, err := postJSON(ts.URL+"/v1/sessions/s/messages", map[string]any{"messages": []any{
					msg("user", fmt.Sprintf("writer %d message %d %s", w, i, chatter(w*1000+i)))}})
				if err != nil || status != 201 {
					return // refused or cut off: never acknowledged
				}
				mu.Lock()
				acked = append(acked, body["ids"].([]any)[0].(string))
				mu.Unlock()
				once.Do(func() { close(started) })
			}
		}()
	}
	<-started
	time.Sleep(200 * time.Millisecond)
	ts.Stop()
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}
	ts2 := startServer(t, dir)
	checkReachable(t, ts2, "s", acked)
	checkCounters(t, ts2, "s")
	t.Logf("%d writes acknowledged around shutdown, all present after restart", len(acked))
}
