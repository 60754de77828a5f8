package main

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
)

// Two real binaries on one database; node A is killed with SIGKILL at
// random moments (2 rounds, or CTXD_KILL_ROUNDS) while writers on both
// nodes store into a roomy session and into a small one that compacts all
// the time, so that A dies holding a session's row lock mid-write or
// mid-compaction. Node B goes on acknowledging writes to both sessions
// right after each kill (nothing stays locked: A's transactions roll back
// with its connections), and every message either node acknowledged is
// in B's answers (as itself or in a summary's sources), with the counters
// matching the messages and a sample of A's found by B's search.
func TestSIGKILLNodeOnPostgres(t *testing.T) {
	// Not in parallel: its two rounds kill A at 200-1000 ms, and beside
	// other tests on a busy machine too few writes land by then for the
	// small session to compact ("no compaction ran").
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	dsn := pgtest.DSN(t)
	rounds := killRounds(t, 2)
	rng := testRand(t, 7)
	b := mustRunBinary(t, t.TempDir(), "--store", dsn)
	nodeB := b.client(t, "")
	nodeB.mustDo(200, "PUT", "/v1/sessions/cmp", map[string]any{"context_window": 1500})
	dirA := t.TempDir()
	var mu sync.Mutex
	acked := map[string][]string{}
	words := map[string]string{} // id in "crash" written on A -> its unique word
	write := func(url, session, word string, i int) bool {
		body := map[string]any{"messages": []any{msg("user", "note "+word+" about the node kill"), msg("assistant", "ack "+word)}}
		if session == "cmp" {
			body = map[string]any{"messages": []any{msg("user", chatter(i))}}
		}
		status, res, err := postJSON(url+"/v1/sessions/"+session+"/messages", body)
		if err != nil || status != 201 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		for _, id := range res["ids"].([]any) {
			acked[session] = append(acked[session], id.(string))
			if session == "crash" && word != "" {
				words[id.(string)] = word
			}
		}
		return true
	}
	for round := range rounds {
		a, err := runBinary(t, dirA, "--store", dsn)
		if err != nil {
			t.Fatalf("round %d: node A did not start: %v\n%s", round, err, a.Log())
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				session := []string{"crash", "cmp"}[w%2]
				url := a.URL
				if w >= 2 {
					url = b.URL
				}
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					word := fmt.Sprintf("kil%dx%dx%d", round, w, i)
					if !write(url, session, word, round*1000+w*100+i) && url == a.URL {
						return // A is gone: this write was never acknowledged
					}
				}
			}()
		}
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		_ = a.cmd.Process.Signal(syscall.SIGKILL)
		<-a.done
		_ = a.cmd.Wait()
		// B acknowledges writes to both sessions after the kill: the row
		// locks A held are gone.
		for _, session := range []string{"crash", "cmp"} {
			deadline := time.Now().Add(20 * time.Second)
			for !write(b.URL, session, fmt.Sprintf("after%dx%s", round, session), round*1000+999) {
				if time.Now().After(deadline) {
					t.Fatalf("round %d: node B acknowledges no write to %s 20 s after A was killed", round, session)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		close(stop)
		wg.Wait()
		checkReachable(t, nodeB, "crash", acked["crash"])
		checkReachable(t, nodeB, "cmp", acked["cmp"])
		checkCounters(t, nodeB, "crash")
		checkCounters(t, nodeB, "cmp")
		n := 0
		for id, word := range words {
			if n++; n > 5 {
				break
			}
			found := false
			for _, r := range nodeB.search(map[string]any{"query": word, "session_id": "crash", "mode": "text", "k": 3}) {
				found = found || r.ID == id
			}
			if !found {
				t.Fatalf("round %d: acknowledged message %s (%s) not found by B's search", round, id, word)
			}
		}
	}
	st := nodeB.mustDo(200, "GET", "/v1/sessions/cmp", nil)
	if st["compactions"].(float64) == 0 {
		t.Fatal("no compaction ran")
	}
	t.Logf("%d kills of A: %d + %d acknowledged writes, %v compactions, all in B's answers after every kill",
		rounds, len(acked["crash"]), len(acked["cmp"]), st["compactions"])
	b.Stop(t)
}
