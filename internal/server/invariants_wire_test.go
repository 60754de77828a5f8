package server_test

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

// TestInvariantsUnderRandomOperations drives sessions through random writes,
// tool calls, compactions, recoveries and context calls, and checks every
// invariant after every step.
func TestInvariantsUnderRandomOperations(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	if v := os.Getenv("CTXD_TEST_SEED"); v != "" {
		seed, _ = strconv.ParseInt(v, 10, 64)
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	ts := startServer(t, t.TempDir())
	steps := 80
	if testing.Short() {
		steps = 40
	}
	for _, session := range []string{"p1", "p2"} {
		window := 1500 + rng.Intn(3000)
		ts.putSession(session, map[string]any{"context_window": window, "keep_recent": rng.Intn(8),
			"relevance_cutoff": rng.Float64() * 0.3})
		var acked []string
		acked = append(acked, ts.store(session, api.MessageIn{Role: "system", Content: "system prompt", Pinned: true})...)
		calls := 0
		for step := 0; step < steps; step++ {
			op := rng.Intn(10)
			// An explicit recover may carry the window past the hard limit
			// (the agent asked for it); the next write or context call
			// compacts. Everything else must leave it under the limit.
			mayExceed := op == 8
			switch {
			case op < 5: // a chat write of 1..4 messages
				var batch []api.MessageIn
				for i := rng.Intn(4); i >= 0; i-- {
					m := msg([]string{"user", "assistant"}[rng.Intn(2)], chatter(rng.Intn(1000)))
					m.Important = rng.Intn(15) == 0
					m.Pinned = rng.Intn(40) == 0
					batch = append(batch, m)
				}
				acked = append(acked, ts.store(session, batch...)...)
			case op < 7: // a tool call with output of random size
				calls++
				out := fmt.Sprintf("result %d\n", calls)
				for i := rng.Intn(400); i > 0; i-- {
					out += fmt.Sprintf("row %d value %d\n", i, rng.Intn(1e6))
				}
				acked = append(acked, ts.store(session, toolTurn(calls, out)...)...)
			case op < 8: // a manual compaction
				var rep memory.CompactionReport
				ts.call(200, "POST", "/v1/sessions/"+session+"/compact", api.CompactIn{Prompt: chatter(rng.Intn(100))}, &rep)
				if rep.TokensAfter > rep.Target && !rep.ProtectedOnly {
					t.Fatalf("step %d: compaction left %v over target %v without saying only protected remain", step, rep.TokensAfter, rep.Target)
				}
			case op < 9: // recover a random cold chunk
				if cold := ts.cold(session, "?limit=1000"); len(cold) > 0 {
					id := cold[rng.Intn(len(cold))].ID
					ts.call(200, "POST", "/v1/sessions/"+session+"/messages/"+id+"/recover", nil, nil)
				}
			default: // a context call
				max := 300 + rng.Intn(3000)
				r := ts.do("POST", "/v1/sessions/"+session+"/context", api.ContextIn{Prompt: chatter(rng.Intn(100)), MaxTokens: &max})
				if r.Status == 409 {
					break // pinned messages outgrew this budget: a clear refusal, not a bug
				}
				if r.Status != 200 {
					t.Fatalf("step %d: context = %d %s", step, r.Status, r.Raw)
				}
				var w api.Context
				ts.decode(r, &w)
				servertest.CheckSequence(t, w.Messages)
				if got := servertest.Recount(t, w.Messages, ""); got > max+600 { // prompt counted separately
					t.Fatalf("step %d: window %d over max_tokens %d", step, got, max)
				}
			}
			servertest.CheckReachable(t, ts.allMessages(session), acked)
			checkCounters(t, ts, session)
			st := ts.session(session)
			if os.Getenv("CTXD_TEST_TRACE") != "" {
				t.Logf("step %d op %d: state %v tokens %v messages %v", step, op, st.State, st.Tokens, st.Messages)
			}
			if st.State == "over_limit" && !mayExceed {
				// Only protected content may keep a window past the hard limit.
				var rep memory.CompactionReport
				ts.call(200, "POST", "/v1/sessions/"+session+"/compact", api.CompactIn{DryRun: true}, &rep)
				if !rep.ProtectedOnly {
					t.Fatalf("step %d (op %d): window over the hard limit with compactable content: %+v\ndry run: %+v", step, op, st, rep)
				}
			}
		}
	}
}

// 50 concurrent writers on one session while compactions and context calls
// run: no lost or duplicated message, counters consistent.
func TestConcurrentWritersCompactionsAndContext(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.putSession("busy", map[string]any{"context_window": 3000})
	writers, per := 50, 6
	if testing.Short() {
		writers = 10
	}
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				r := ts.do("POST", "/v1/sessions/busy/messages", api.AppendIn{Messages: []api.MessageIn{msg("user", fmt.Sprintf("writer %d says %s", w, chatter(w*per+i)))}})
				var out api.AppendOut
				if r.Status != 201 || json.Unmarshal(r.Raw, &out) != nil || len(out.IDs) != 1 {
					t.Errorf("write = %d %s", r.Status, r.Raw)
					return
				}
				mu.Lock()
				acked = append(acked, out.IDs[0])
				mu.Unlock()
			}
		}(w)
	}
	var bg sync.WaitGroup
	bg.Add(2)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if r := ts.do("POST", "/v1/sessions/busy/compact", map[string]any{}); r.Status != 200 {
				t.Errorf("compact = %d %s", r.Status, r.Raw)
				return
			}
		}
	}()
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if r := ts.do("POST", "/v1/sessions/busy/context", map[string]any{"prompt": "river", "max_tokens": 1500}); r.Status != 200 {
				t.Errorf("context = %d %s", r.Status, r.Raw)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	if len(acked) != writers*per {
		t.Fatalf("%d writes acknowledged, want %d", len(acked), writers*per)
	}
	servertest.CheckReachable(t, ts.allMessages("busy"), acked)
	msgs := checkCounters(t, ts, "busy")
	originals := 0
	for _, m := range msgs {
		if m.Kind != "summary" {
			originals++
		}
	}
	if originals != len(acked) {
		t.Fatalf("%d original messages stored, %d acknowledged", originals, len(acked))
	}
	servertest.CheckNoOverlappingCompactions(t, ts.Dir, "busy")
}
