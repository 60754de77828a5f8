package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/admin"
)

// compactCold fills a session with chatter tagged with word and compacts it,
// so it has cold originals and a mirror file; it returns the ids that went
// cold.
func compactCold(t *testing.T, ts *testServer, session, word string) []string {
	t.Helper()
	ts.mustDo(200, "PUT", "/v1/sessions/"+session, map[string]any{"context_window": 100000, "keep_recent": 4})
	for i := range 24 {
		ts.store(session, msg([]string{"user", "assistant"}[i%2], chatter(i)+" "+word))
	}
	ts.mustDo(200, "PUT", "/v1/sessions/"+session, map[string]any{"context_window": 1500})
	rep := ts.mustDo(200, "POST", "/v1/sessions/"+session+"/compact", map[string]any{"prompt": "the weather"})
	var cold []string
	for _, k := range []string{"dropped", "summarized"} {
		for _, id := range rep[k].([]any) {
			cold = append(cold, id.(string))
		}
	}
	if len(cold) == 0 {
		t.Fatalf("compaction of %s moved nothing cold: %v", session, rep)
	}
	return cold
}

// verifyReport runs `ctxd verify --json` on a stopped server's data dir.
func verifyReport(t *testing.T, dir string) *admin.VerifyReport {
	t.Helper()
	out, errOut, err := runCtxd(t, "verify", "--data-dir", dir, "--json")
	var res verifyResult
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil || res.After == nil {
		t.Fatalf("verify --json: %v / %v\nstdout: %s\nstderr: %s", err, jerr, out, errOut)
	}
	return res.After
}

func mustConsistent(t *testing.T, dir, when string) {
	t.Helper()
	if rep := verifyReport(t, dir); !rep.Consistent() {
		t.Fatalf("verify %s: %d findings: %v", when, len(rep.Findings), rep.Findings)
	}
}

// DELETE /v1/sessions/{id} removes everything of the session (API.md),
// its cold mirror file too; a session re-created with the same id starts a
// file of its own instead of appending to the deleted one's.
func TestDeleteSessionRemovesColdMirror(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	old := compactCold(t, ts, "doomed", "aardvarkold")
	keep := compactCold(t, ts, "kept", "keptword")
	path := coldFile(dir, "doomed")
	if n := len(readLines(t, path)); n != len(old) {
		t.Fatalf("mirror of doomed has %d lines, want %d", n, len(old))
	}

	ts.mustDo(204, "DELETE", "/v1/sessions/doomed", nil)
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("mirror file of the deleted session: stat = %v, want it gone", err)
	}
	if n := len(readLines(t, coldFile(dir, "kept"))); n != len(keep) {
		t.Fatalf("another session's mirror has %d lines after the delete, want %d", n, len(keep))
	}

	again := compactCold(t, ts, "doomed", "zebranew")
	lines := readLines(t, path)
	if len(lines) != len(again) {
		t.Fatalf("re-created session's mirror has %d lines, want its own %d", len(lines), len(again))
	}
	for _, l := range lines {
		if strings.Contains(l, "aardvarkold") || contains(old, lineID(t, l)) {
			t.Fatalf("re-created session's mirror holds a line of the deleted one: %s", l)
		}
	}
	ts.Stop()
	mustConsistent(t, dir, "after delete and re-create")
}

// Start-up rewrites mirror files that drifted from the store, as a kill -9
// between a store commit and the mirror write leaves them: lines missing, a
// line of a message no longer cold, a line that differs from the store, a
// cut last line, a whole file gone. A file of a session the store lacks is
// kept (it may be the last copy of its originals) and only reported.
func TestStartReconcilesColdMirror(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	a := compactCold(t, ts, "alpha", "alphaword")
	compactCold(t, ts, "beta", "betaword")
	compactCold(t, ts, "gamma", "gammaword")
	ts.Stop()
	mustConsistent(t, dir, "before the damage")

	// alpha: its first line lost, a line of an id the store never had,
	// another line's content changed, and a last line cut short.
	lines := readLines(t, coldFile(dir, "alpha"))
	lost := lineID(t, lines[0])
	bogus := strings.Replace(lines[1], lineID(t, lines[1]), "01BOGUS0000000000000000000", 1)
	changed := strings.Replace(lines[2], "turn", "TURN", 1)
	torn := lines[3][:len(lines[3])/2]
	writeFile(t, coldFile(dir, "alpha"), strings.Join(append([]string{bogus, changed}, lines[4:]...), "")+lines[3]+torn)
	// beta: the whole file gone.
	if err := os.Remove(coldFile(dir, "beta")); err != nil {
		t.Fatal(err)
	}
	// An orphan: a mirror file of a session the store does not have.
	orphan := coldFile(dir, "lost")
	writeFile(t, orphan, strings.ReplaceAll(readLines(t, coldFile(dir, "gamma"))[0], `"gamma"`, `"lost"`))

	rep := verifyReport(t, dir)
	counts := rep.Counts()
	for _, k := range []string{memory.FindColdMissing, memory.FindColdStale, memory.FindColdTorn, admin.FindColdOrphan} {
		if counts[k] == 0 {
			t.Fatalf("the damage made no %s finding: %v", k, rep.Findings)
		}
	}

	ts = startServer(t, dir)
	// A request first: a Stop racing the HTTP server's start can miss it
	// and wait for it forever.
	ts.mustDo(200, "GET", "/v1/sessions/alpha", nil)
	ts.Stop()
	rep = verifyReport(t, dir)
	if len(rep.Findings) != 1 || rep.Findings[0].Kind != admin.FindColdOrphan || rep.Findings[0].SessionID != "lost" {
		t.Fatalf("after a start, verify finds %v; want only the orphan file", rep.Findings)
	}
	if _, err := os.Stat(orphan); err != nil {
		t.Fatalf("start-up removed the orphan mirror file: %v", err)
	}
	got := readLines(t, coldFile(dir, "alpha"))
	ids := map[string]bool{}
	for _, l := range got {
		ids[lineID(t, l)] = true
		if strings.Contains(l, "TURN") {
			t.Fatalf("the changed line survived: %s", l)
		}
	}
	if !ids[lost] || ids["01BOGUS0000000000000000000"] || len(got) != len(a) {
		t.Fatalf("alpha's mirror after start: %d lines, lost line back %v, bogus line there %v; want %d lines",
			len(got), ids[lost], ids["01BOGUS0000000000000000000"], len(a))
	}
	if len(readLines(t, coldFile(dir, "beta"))) == 0 {
		t.Fatal("beta's mirror was not written back")
	}
}

// Without any crash, a session whose summary rolls many times, with
// recoveries dropped again, leaves a mirror verify finds consistent: a line
// tells how its message first went cold, and a later drop or a rolled
// summary does not make it stale (before, 272 lines of this session were).
func TestColdMirrorConsistentAfterRollingSummaries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ts.mustDo(200, "PUT", "/v1/sessions/roll", map[string]any{"context_window": 1200, "keep_recent": 2})
	for i := range 150 {
		ts.store("roll", msg("user", chatter(i)), msg("assistant", chatter(i+1)))
		if i%30 == 29 {
			for _, c := range ts.mustDo(200, "GET", "/v1/sessions/roll/cold?limit=3", nil)["chunks"].([]any) {
				ts.mustDo(200, "POST", fmt.Sprintf("/v1/sessions/roll/messages/%s/recover", c.(map[string]any)["id"]), nil)
			}
		}
	}
	if err := ts.Main.Service.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := ts.mustDo(200, "GET", "/v1/sessions/roll", nil); st["compactions"].(float64) < 10 {
		t.Fatalf("only %v compactions: the summary hardly rolled", st["compactions"])
	}
	// A cold message names a summary only while that summary holds it; the
	// sections that rolled off are dropped as summary_rolled.
	rolled := 0
	for _, c := range coldChunks(ts, "roll") {
		if c["drop_reason"] == memory.ReasonSummaryRolled {
			rolled++
		}
		sid, _ := c["summary_id"].(string)
		if sid == "" {
			continue
		}
		sources, _ := ts.mustDo(200, "GET", "/v1/messages/"+sid, nil)["sources"].([]any)
		if !slices.Contains(sources, c["id"]) {
			t.Errorf("cold %v (%v) names summary %s, which does not hold it", c["id"], c["drop_reason"], sid)
		}
	}
	if rolled == 0 {
		t.Error("no cold message was released by a rolling summary")
	}
	ts.Stop()
	mustConsistent(t, dir, "after rolling summaries, with no restart")
}

// The real binary is killed with SIGKILL while writers keep small sessions
// compacting and a deleter deletes and re-creates them. After each kill the
// binary starts once more (start-up reconciles the mirror) and stops
// cleanly, and `ctxd verify` must then find nothing: no cold line missing or
// stale, no file of a deleted session.
func TestSIGKILLColdMirror(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	coldKillRounds := killRounds(t, 12)
	rng := testRand(t, 1)
	dir := t.TempDir()
	sessions := []string{"c0", "c1", "c2"}
	drift := map[string]int{} // cold findings the kills left, by kind
	deletes := 0
	for round := range coldKillRounds {
		cmd, url := startBinary(t, dir)
		for _, s := range sessions {
			if status, _, err := putJSON(url+"/v1/sessions/"+s, map[string]any{"context_window": 1200, "keep_recent": 2}); err != nil || status != 200 {
				t.Fatalf("round %d: PUT session %s = %d, %v", round, s, status, err)
			}
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		for w := range sessions {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					body := map[string]any{"messages": []any{msg("user", chatter(round*1000+w*100+i)),
						msg("assistant", chatter(round*1000+w*100+i+1))}}
					status, _, err := postJSON(url+"/v1/sessions/"+sessions[w]+"/messages", body)
					if err != nil {
						return
					}
					if status == 404 { // deleted under us: make it again
						putJSON(url+"/v1/sessions/"+sessions[w], map[string]any{"context_window": 1200, "keep_recent": 2})
					}
				}
			}(w)
		}
		wg.Add(1)
		del := rand.New(rand.NewPCG(rng.Uint64(), 2)) // the deleter's own: rng is not safe to share
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(50+del.IntN(150)) * time.Millisecond):
				}
				status, err := deleteURL(url + "/v1/sessions/" + sessions[del.IntN(len(sessions))])
				if err != nil {
					return
				}
				if status == 204 {
					mu.Lock()
					deletes++
					mu.Unlock()
				}
			}
		}()
		time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		close(stop)
		wg.Wait()

		// What the kill left, before any start reconciles it.
		for _, f := range verifyReport(t, dir).Findings {
			if strings.HasPrefix(f.Kind, "cold_") {
				drift[f.Kind]++
			}
		}
		cmd, _ = startBinary(t, dir)
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("round %d: server stopped with %v", round, err)
		}
		mustConsistent(t, dir, fmt.Sprintf("after kill round %d and a restart", round))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "cold", memory.DefaultTenant, "*.jsonl.gz"))
	t.Logf("%d kill rounds, %d session deletes, cold findings left by the kills %v, all reconciled at start; %d mirror files",
		coldKillRounds, deletes, drift, len(files))
	if deletes == 0 {
		t.Fatal("no session was deleted: the test proved nothing about deletes")
	}
}

func putJSON(url string, body any) (int, map[string]any, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequest("PUT", url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var out map[string]any
	err = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out, err
}

func deleteURL(url string) (int, error) {
	req, err := http.NewRequest("DELETE", url, nil)
	if err != nil {
		return 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// A recovered original keeps its mirror line when the session's file is
// rewritten (here by deleting another cold message): the line is written
// once, when a message first goes cold, and a recovered message dropped
// again writes none, so a rewrite that left it out lost its cold copy for
// good (verify failed after a clean stop, restore-cold could not bring it
// back).
func TestRecoveredKeepsMirrorLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	cold := compactCold(t, ts, "s", "walrus")
	if len(cold) < 2 {
		t.Fatalf("want two cold messages, have %v", cold)
	}
	recovered, other := cold[0], cold[1]
	ts.mustDo(200, "POST", "/v1/sessions/s/messages/"+recovered+"/recover", nil)
	ts.mustDo(204, "DELETE", "/v1/messages/"+other, nil)
	b, err := readColdFile(coldFile(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), recovered) {
		t.Errorf("the mirror file rewritten after a delete lost the line of recovered message %s", recovered)
	}
	if strings.Contains(string(b), other) {
		t.Errorf("the deleted message %s still has a mirror line", other)
	}
	ts.Stop()
	mustConsistent(t, dir, "after a recovery and a delete")
}

// With the cold mirror unwritable (here a file in place of the tenant's
// directory), a compaction is still committed to the store, but /readyz
// answers 503 and says the mirror cannot be written (it said 200 while
// compactions went unmirrored); deleting a session works (it answered
// 500). Once the mirror is writable again the server writes what is
// missing, removes the deleted session's file, and is ready again.
func TestUnwritableMirrorNotReady(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	compactCold(t, ts, "gone", "capybara")
	tenantDir := filepath.Dir(coldFile(dir, "gone"))
	if err := os.Rename(tenantDir, tenantDir+".away"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, tenantDir, "not a directory")

	compactCold(t, ts, "kept", "otter")
	r := ts.do("GET", "/readyz", nil)
	if r.Status != 503 || !strings.Contains(string(r.Raw), "cold mirror cannot be written") {
		t.Fatalf("/readyz with compactions unmirrored: %d %s, want 503 naming the mirror", r.Status, r.Raw)
	}
	ts.mustDo(204, "DELETE", "/v1/sessions/gone", nil)

	if err := os.Remove(tenantDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tenantDir+".away", tenantDir); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for ts.do("GET", "/readyz", nil).Status != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("not ready 30 s after the mirror was writable again: %s", ts.do("GET", "/readyz", nil).Raw)
		}
		time.Sleep(100 * time.Millisecond) // polling the API the test waits on, not a guess
	}
	if _, err := os.Stat(coldFile(dir, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the deleted session's mirror file is still there: %v", err)
	}
	ts.Stop()
	mustConsistent(t, dir, "after the mirror was writable again")
}
