package main

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/server"
)

// adminKillSeed is what the admin kill rounds start from: a source data dir
// and its export, the messages the API acknowledged into it, a data dir
// holding one other acknowledged session for imports to land in, and how
// long the two admin verbs take on them.
type adminKillSeed struct {
	src, export, base string
	acked, kept       map[string]string // id -> content
	importTook        time.Duration
	repairTook        time.Duration
}

func seedAdminKill(t *testing.T) *adminKillSeed {
	t.Helper()
	s := &adminKillSeed{src: t.TempDir(), base: t.TempDir(), acked: map[string]string{}, kept: map[string]string{}}
	ts := startServer(t, s.src)
	populate(t, ts)
	writeBatches(ts, 0, 10, "", "")
	for _, sess := range []string{"alpha", "beta", "gamma", "big"} {
		for _, m := range allMessages(ts, sess) {
			s.acked[m.ID] = m.Content
		}
	}
	ts.Stop()
	s.export = filepath.Join(t.TempDir(), "all.jsonl")
	mustRun(t, "export", "--data-dir", s.src, "--all", "--vectors", "--out", s.export)

	ts = startServer(t, s.base)
	for i, id := range ts.store("keep", msg("user", "the okapi stays"), msg("assistant", "the okapi stays put")) {
		s.kept[id] = []string{"the okapi stays", "the okapi stays put"}[i]
	}
	ts.Stop()

	// Uninterrupted runs: how long each takes, so kills land inside them.
	d := t.TempDir()
	copyDir(t, s.base, d)
	start := time.Now()
	mustRun(t, "import", "--data-dir", d, s.export)
	s.importTook = time.Since(start)
	d = repairable(t, s)
	start = time.Now()
	mustRun(t, "verify", "--repair", "--data-dir", d)
	s.repairTook = time.Since(start)
	return s
}

// repairable is a copy of the source data dir with work for verify
// --repair: the index and the cold mirror gone.
func repairable(t *testing.T, s *adminKillSeed) string {
	t.Helper()
	d := t.TempDir()
	copyDir(t, s.src, d)
	os.RemoveAll(server.IndexPath(d))
	os.RemoveAll(server.ColdPath(d))
	return d
}

// killMidway runs `ctxd args...` and kills it with SIGKILL at a random
// moment of about *took; it tells whether the kill came before the verb
// ended, and when it did not, *took becomes the run's time: the machine
// may be faster than when took was measured.
func killMidway(t *testing.T, rng *rand.Rand, took *time.Duration, args ...string) bool {
	t.Helper()
	after := 10*time.Millisecond + time.Duration(rng.Int64N(int64(*took)*3/4))
	start := time.Now()
	cmd := exec.Command(ctxdBinary(t), args...)
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ctxd %s exited before the kill: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		*took = min(*took, time.Since(start))
		return false
	case <-time.After(after):
	}
	cmd.Process.Signal(syscall.SIGKILL)
	err := <-done
	if strings.Contains(errb.String(), "panic:") {
		t.Fatalf("ctxd %s panicked:\n%s", strings.Join(args, " "), errb.String())
	}
	return err != nil // killed; a nil error is a verb that ended just before
}

// checkServed starts the server on dir and counts the messages of want it
// does not serve with their content; then it stops it and requires `ctxd
// verify` to be clean: the start repaired whatever the kill left.
func checkServed(t *testing.T, dir string, want map[string]string) (lost int) {
	t.Helper()
	b, err := runBinary(t, dir)
	if err != nil {
		t.Fatalf("ctxd serve after the kill exited %v:\n%s", err, b.Log())
	}
	c := b.ready(t, dir)
	for id, content := range want {
		if r := c.do("GET", "/v1/messages/"+id, nil); r.Status != 200 || r.Body["content"] != content {
			t.Errorf("acknowledged message %s after the kill: %d %s", id, r.Status, r.Raw)
			lost++
		}
	}
	b.Stop(t)
	if out, errOut, code := runBinaryCmd(t, "verify", "--data-dir", dir); code != 0 {
		t.Fatalf("verify after the kill and a start exited %d:\n%s%s", code, out, errOut)
	}
	return lost
}

// `ctxd import` and `ctxd verify --repair` (the admin verbs that write a
// stopped server's data dir) are killed with SIGKILL at random moments of
// their run, twice each by default (CTXD_KILL_ROUNDS sets the total).
// After each kill the server starts, serves every message acknowledged
// before (the import's target session kept, the repaired dir's every
// message), and `ctxd verify` is clean; the verb run again completes and
// the data is whole.
func TestSIGKILLAdmin(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	rounds := killRounds(t, 4)
	rng := testRand(t, 3)
	s := seedAdminKill(t)
	t.Logf("uninterrupted: import %v, verify --repair %v", s.importTook, s.repairTook)
	killed := map[string]int{}
	lost, refused := 0, 0
	for round := range rounds {
		if round%2 == 0 {
			// A verb that ends before its kill (the machine ran it faster
			// than measured) is run again on a fresh copy, up to three
			// times, so that the rounds test kills, not finished runs.
			var d string
			for try := 0; try < 3; try++ {
				d = t.TempDir()
				copyDir(t, s.base, d)
				if killMidway(t, rng, &s.importTook, "import", "--data-dir", d, s.export) {
					killed["import"]++
					break
				}
			}
			// A kill once the import began writing leaves part of the
			// export: the server refuses it, saying so, rather than
			// serve it as if whole. Killed before, the dir is as it was.
			partial := false
			if b, err := runBinary(t, d); err != nil {
				if !strings.Contains(b.Log(), "import into this store did not finish") {
					t.Fatalf("round %d: serve after a killed import exited %v, not naming the import:\n%s", round, err, b.Log())
				}
				refused++
				partial = true
			} else {
				b.Stop(t)
				lost += checkServed(t, d, s.kept)
			}
			// The same import run again, without --replace, finishes
			// it: the whole export is there, and the session kept. A
			// kill that landed after the import finished (its mark
			// cleared, the process not yet gone) left a whole import,
			// which a second one refuses as present already; the checks
			// below then find every message.
			if out, errOut, code := runBinaryCmd(t, "import", "--data-dir", d, s.export); code != 0 &&
				(partial || !strings.Contains(out+errOut, "exist in this data dir already")) {
				t.Fatalf("round %d: import again exited %d:\n%s%s", round, code, out, errOut)
			}
			lost += checkServed(t, d, s.acked)
			lost += checkServed(t, d, s.kept)
			continue
		}
		var d string
		for try := 0; try < 3; try++ {
			d = repairable(t, s)
			if killMidway(t, rng, &s.repairTook, "verify", "--repair", "--data-dir", d) {
				killed["verify --repair"]++
				break
			}
		}
		lost += checkServed(t, d, s.acked)
		if out, errOut, code := runBinaryCmd(t, "verify", "--repair", "--data-dir", d); code != 0 {
			t.Fatalf("round %d: verify --repair after the kill exited %d:\n%s%s", round, code, out, errOut)
		}
	}
	if rounds >= 4 && (killed["import"] == 0 || killed["verify --repair"] == 0) {
		t.Fatalf("the kills never landed inside a run: %v", killed)
	}
	t.Logf("%d kill rounds (%v killed mid-way; %d partial imports refused at start, each finished by importing again), %d acknowledged messages lost, verify clean after every start",
		rounds, killed, refused, lost)
	if lost > 0 {
		t.Fatalf("%d acknowledged messages lost", lost)
	}
}
