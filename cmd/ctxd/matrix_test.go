package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/server"
	bolt "go.etcd.io/bbolt"
)

// matrixSeed is the data dir every damage case starts from, and what the
// API acknowledged into it: every message's id and content.
type matrixSeed struct {
	dir      string
	contents map[string]string // id -> content
	sessions map[string]string // id -> session
	delta    []string          // the two messages of session "delta"
}

func seedMatrix(t *testing.T) *matrixSeed {
	t.Helper()
	s := &matrixSeed{dir: t.TempDir(), contents: map[string]string{}, sessions: map[string]string{}}
	ts := startServer(t, s.dir)
	populate(t, ts)
	s.delta = ts.store("delta", msg("user", "the capybara naps"), msg("assistant", "the capybara wakes at noon"))
	for _, sess := range []string{"alpha", "beta", "gamma", "delta"} {
		for _, m := range allMessages(ts, sess) {
			s.contents[m.ID] = m.Content
			s.sessions[m.ID] = sess
		}
	}
	ts.Stop()
	// As the maintain loop leaves it once the index holds every change: a
	// lost index must be rebuilt from the store, not replayed from the log.
	trimChangeLog(t, s.dir)
	return s
}

// bucketRecordOffset is where the value of key in bucket starts in a
// stopped server's ctxd.db.
func bucketRecordOffset(t *testing.T, dir, bucket, key string) (int, int) {
	t.Helper()
	db, err := bolt.Open(server.StorePath(dir), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var rec []byte
	db.View(func(tx *bolt.Tx) error {
		rec = bytes.Clone(tx.Bucket([]byte(bucket)).Get([]byte(key)))
		return nil
	})
	db.Close()
	file, err := os.ReadFile(server.StorePath(dir))
	if err != nil || len(rec) == 0 {
		t.Fatalf("%s record of %s: %v", bucket, key, err)
	}
	off := bytes.Index(file, rec)
	if off < 0 {
		t.Fatalf("%s record of %s not in the file", bucket, key)
	}
	return off, len(rec)
}

// filesUnder lists the regular files under dir whose name matches glob.
func filesUnder(t *testing.T, dir, glob string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if ok, _ := filepath.Match(glob, fi.Name()); ok {
				out = append(out, p)
			}
		}
		return nil
	})
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatalf("no %s under %s", glob, dir)
	}
	return out
}

func truncateHalf(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(s)
	f.Close()
}

// The outcomes a damage case may have; silence is none of them.
const (
	outRepaired = "repaired at start" // the server starts, says so in its log, and verify is clean after
	outRefused  = "refused"           // the server does not start (or stops once it finds the damage loading vectors), and its log names the damage
	outReported = "reported"          // the server starts, serves the rest, and verify names the damage
	// outTolerated: the damage touched nothing acknowledged (the event
	// logs are an audit trail the server appends to): the server starts,
	// serves everything, verify is clean, and there is nothing to say.
	outTolerated = "tolerated"
)

type matrixCase struct {
	name   string
	damage func(t *testing.T, dir string, s *matrixSeed)
	want   string // an outcome
	says   string // what the log (repaired, refused) or verify (reported) must say
	// damaged: messages the damage makes unreadable; the server must
	// answer them with a 500 data_damaged naming them.
	damaged func(s *matrixSeed) []string
	// destroyed: the case's damage destroys the store: no message is
	// checked (the refusal is the outcome).
}

func matrixCases() []matrixCase {
	store := func(f func(t *testing.T, p string)) func(*testing.T, string, *matrixSeed) {
		return func(t *testing.T, dir string, _ *matrixSeed) { f(t, server.StorePath(dir)) }
	}
	eachIndexFile := func(glob string, f func(t *testing.T, p string)) func(*testing.T, string, *matrixSeed) {
		return func(t *testing.T, dir string, _ *matrixSeed) {
			for _, p := range filesUnder(t, server.IndexPath(dir), glob) {
				f(t, p)
			}
		}
	}
	mirror := func(session string) func(dir string) string {
		return func(dir string) string { return coldFile(dir, session) }
	}
	deltaSecond := func(s *matrixSeed) []string { return s.delta[1:] }
	return []matrixCase{
		// The store.
		{name: "store truncated to half", want: outRefused, says: "ctxd.db",
			damage: store(truncateHalf)},
		{name: "store zeroed page of vector records", want: outRefused, says: "the store file is damaged",
			damage: func(t *testing.T, dir string, s *matrixSeed) {
				off, _ := bucketRecordOffset(t, dir, "vectors", s.delta[0])
				f, err := os.OpenFile(server.StorePath(dir), os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				f.WriteAt(make([]byte, 4096), int64(off/4096*4096))
			}},
		{name: "store one byte flipped in a message record", want: outReported, says: "record_damaged", damaged: deltaSecond,
			damage: func(t *testing.T, dir string, s *matrixSeed) {
				off, n := recordOffset(t, dir, s.delta[1])
				damageByte(t, dir, off+n-3)
			}},
		{name: "store one byte flipped in a vector record", want: outReported, says: "vector record: checksum mismatch",
			damage: func(t *testing.T, dir string, s *matrixSeed) {
				off, n := bucketRecordOffset(t, dir, "vectors", s.delta[0])
				damageByte(t, dir, off+n/2)
			}},
		{name: "store deleted", want: outRefused, says: "store was lost",
			damage: store(func(t *testing.T, p string) { os.Remove(p) })},
		{name: "store 0 bytes", want: outRefused, says: "store was lost",
			damage: store(func(t *testing.T, p string) { os.Truncate(p, 0) })},
		{name: "store garbage header", want: outRefused, says: "ctxd.db",
			damage: store(func(t *testing.T, p string) {
				f, _ := os.OpenFile(p, os.O_RDWR, 0)
				f.WriteAt(bytes.Repeat([]byte{0xEE}, 8192), 0)
				f.Close()
			})},
		// The full-text index.
		{name: "index dir missing", want: outRepaired, says: "rebuilding the full-text index from the store",
			damage: func(t *testing.T, dir string, _ *matrixSeed) { os.RemoveAll(server.IndexPath(dir)) }},
		{name: "index dir emptied", want: outRepaired, says: "rebuilding the full-text index from the store",
			damage: func(t *testing.T, dir string, _ *matrixSeed) {
				entries, _ := os.ReadDir(server.IndexPath(dir))
				for _, e := range entries {
					os.RemoveAll(filepath.Join(server.IndexPath(dir), e.Name()))
				}
			}},
		{name: "index segment truncated", want: outRepaired, says: "rebuilding the full-text index from the store",
			damage: eachIndexFile("*.zap", truncateHalf)},
		{name: "index garbage root.bolt", want: outRepaired, says: "rebuilding the full-text index from the store",
			damage: eachIndexFile("root.bolt", func(t *testing.T, p string) {
				os.WriteFile(p, bytes.Repeat([]byte("garbage!"), 2048), 0o600)
			})},
		{name: "index metadata garbage", want: outRepaired, says: "rebuilding the full-text index from the store",
			damage: eachIndexFile("index_meta.json", func(t *testing.T, p string) { os.WriteFile(p, []byte("{not json"), 0o600) })},
		{name: "index root.bolt deleted", want: outRepaired, says: "rebuilding the full-text index from the store",
			damage: eachIndexFile("root.bolt", func(t *testing.T, p string) { os.Remove(p) })},
		// Every segment file: with only the newest gone, Bleve may fall back
		// to an older snapshot (a merge's inputs, the same documents) or to
		// one without the mapping, which makes the outcome vary run to run.
		{name: "index segment files deleted", want: outRepaired, says: "rebuilding the full-text index from the store",
			damage: func(t *testing.T, dir string, _ *matrixSeed) {
				for _, seg := range filesUnder(t, server.IndexPath(dir), "*.zap") {
					os.Remove(seg)
				}
			}},
		{name: "index path a regular file", want: outRepaired, says: "rebuilding the full-text index from the store",
			damage: func(t *testing.T, dir string, _ *matrixSeed) {
				os.RemoveAll(server.IndexPath(dir))
				os.WriteFile(server.IndexPath(dir), []byte("not an index"), 0o600)
			}},
		// The cold mirror.
		{name: "mirror truncated last line", want: outRepaired, says: "mirror",
			damage: func(t *testing.T, dir string, _ *matrixSeed) {
				p := mirror("alpha")(dir)
				fi, _ := os.Stat(p)
				os.Truncate(p, fi.Size()-10)
			}},
		{name: "mirror garbage line", want: outRepaired, says: "mirror",
			damage: func(t *testing.T, dir string, _ *matrixSeed) { appendTo(t, mirror("gamma")(dir), "}}garbage{{\n") }},
		{name: "mirror one byte flipped in a compressed segment", want: outRepaired, says: "damaged compressed segment",
			damage: func(t *testing.T, dir string, _ *matrixSeed) {
				p := mirror("alpha")(dir)
				fi, _ := os.Stat(p)
				damageFileByte(t, p, fi.Size()/2)
			}},
		{name: "mirror file missing", want: outRepaired, says: "mirror",
			damage: func(t *testing.T, dir string, _ *matrixSeed) { os.Remove(mirror("alpha")(dir)) }},
		{name: "mirror stale line", want: outRepaired, says: "mirror",
			damage: func(t *testing.T, dir string, _ *matrixSeed) {
				p := mirror("gamma")(dir)
				lines := readLines(t, p)
				lines[0] = strings.Replace(lines[0], "the", "THE", 1)
				writeFile(t, p, strings.Join(lines, ""))
			}},
		{name: "mirror extra file of an unknown session", want: outReported, says: "cold_orphan_file",
			damage: func(t *testing.T, dir string, _ *matrixSeed) {
				line := readLines(t, mirror("gamma")(dir))[0]
				writeFile(t, mirror("lost")(dir), strings.ReplaceAll(line, `"gamma"`, `"lost"`))
			}},
		// The event logs.
		{name: "logs truncated JSONL", want: outTolerated,
			damage: func(t *testing.T, dir string, _ *matrixSeed) {
				for _, p := range filesUnder(t, server.LogsPath(dir), "*.jsonl") {
					if fi, _ := os.Stat(p); fi.Size() > 4 {
						os.Truncate(p, fi.Size()-3)
					}
				}
			}},
		{name: "logs garbage lines", want: outTolerated,
			damage: func(t *testing.T, dir string, _ *matrixSeed) {
				for _, p := range filesUnder(t, server.LogsPath(dir), "*.jsonl") {
					appendTo(t, p, "garbage\x00{{\n")
				}
			}},
		{name: "logs dir unwritable (a file in its place)", want: outRefused, says: "logs",
			damage: func(t *testing.T, dir string, _ *matrixSeed) {
				os.RemoveAll(server.LogsPath(dir))
				os.WriteFile(server.LogsPath(dir), []byte("not a dir"), 0o600)
			}},
		{name: "logs dir missing", want: outTolerated,
			damage: func(t *testing.T, dir string, _ *matrixSeed) { os.RemoveAll(server.LogsPath(dir)) }},
	}
}

// Each damage a disk, an editor or a crash can do to a data dir, on a copy
// of the same seeded dir, with the real binary: the outcome is never
// silent. Either the server repairs it at start and says so (verify is
// clean after), or it refuses to start and its log names the damage, or it
// starts, answers what the damage touched with a JSON 500 naming it, serves
// the rest, and verify names the damage (damage to the event logs, which
// hold nothing acknowledged, is tolerated). Every acknowledged message the
// damage did not destroy is served with its content.
func TestCorruptionMatrix(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the real binary once per damage case")
	}
	seed := seedMatrix(t)
	cases := matrixCases()
	if len(cases) < 20 {
		t.Fatalf("%d damage cases, want at least 20", len(cases))
	}
	var mu sync.Mutex
	outcomes := map[string]string{} // case -> outcome seen, for the cases that ran
	failed := 0
	// The cases run in parallel, each on its own copy of the seed and its
	// own binary; the group returns when all have.
	t.Run("cases", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				t.Cleanup(func() {
					if t.Failed() {
						mu.Lock()
						failed++
						outcomes[tc.name] += " FAILED"
						mu.Unlock()
					}
				})
				dir := t.TempDir()
				copyDir(t, seed.dir, dir)
				tc.damage(t, dir, seed)
				got := runMatrixCase(t, dir, seed, tc)
				mu.Lock()
				outcomes[tc.name] = got
				mu.Unlock()
				if got != tc.want {
					t.Fatalf("outcome %q, want %q", got, tc.want)
				}
			})
		}
	})
	var report []string
	for _, tc := range cases {
		if got, ok := outcomes[tc.name]; ok {
			report = append(report, fmt.Sprintf("  %-45s %s", tc.name, got))
		}
	}
	t.Logf("%d damage cases run, %d failed, %d acknowledged messages checked in each:\n%s",
		len(report), failed, len(seed.contents), strings.Join(report, "\n"))
}

// runMatrixCase starts the binary on the damaged dir and returns the
// outcome it saw, failing the test on any silent one.
func runMatrixCase(t *testing.T, dir string, seed *matrixSeed, tc matrixCase) string {
	t.Helper()
	b, err := runBinary(t, dir)
	if err == nil {
		// The vectors load after the server listens: a store too damaged
		// to read them stops it then, as it refused to start before.
		err = b.vectorsLoaded(t)
	}
	if err != nil {
		if strings.Contains(b.Log(), "panic:") {
			t.Fatalf("ctxd serve panicked:\n%s", b.Log())
		}
		if !strings.Contains(b.Log(), tc.says) {
			t.Fatalf("refused without naming the damage (%q):\n%s", tc.says, b.Log())
		}
		return outRefused
	}
	c := b.ready(t, dir)
	damaged := map[string]bool{}
	if tc.damaged != nil {
		for _, id := range tc.damaged(seed) {
			damaged[id] = true
		}
	}
	var unreadable []string
	for id, content := range seed.contents {
		r := c.do("GET", "/v1/messages/"+id, nil)
		switch {
		case r.Status == 200 && r.Body["content"] == content:
		case r.Status >= 500 && r.errCode() == "data_damaged" && strings.Contains(string(r.Raw), id):
			unreadable = append(unreadable, id)
			if !damaged[id] {
				// Named, but the damage was not meant to reach it: the
				// case reports more than it says; not silent, but wrong.
				t.Errorf("message %s of %s answered %d %s", id, seed.sessions[id], r.Status, r.Raw)
			}
		default:
			t.Errorf("SILENT: acknowledged message %s of %s answered %d %s", id, seed.sessions[id], r.Status, r.Raw)
		}
	}
	for id := range damaged {
		if !contains(unreadable, id) {
			t.Errorf("damaged message %s was served as if whole", id)
		}
	}
	if got := c.search(map[string]any{"query": "penguins", "mode": "text", "k": 5}); len(got) == 0 {
		t.Errorf("text search found nothing after the start")
	}
	if r := c.do("GET", "/v1/events/compaction", nil); r.Status != 200 {
		t.Errorf("GET /v1/events/compaction = %d %s", r.Status, r.Raw)
	}
	b.Stop(t)
	log := b.Log()
	out, errOut, code := runBinaryCmd(t, "verify", "--data-dir", dir)
	if code == 0 {
		if len(unreadable) > 0 {
			t.Fatalf("SILENT: verify clean while %v are unreadable", unreadable)
		}
		if tc.says == "" {
			return outTolerated
		}
		if !strings.Contains(log, tc.says) {
			t.Fatalf("repaired at start without saying %q; log:\n%s", tc.says, log)
		}
		return outRepaired
	}
	if !strings.Contains(out, tc.says) {
		t.Fatalf("verify exited %d without naming the damage (%q):\n%s%s", code, tc.says, out, errOut)
	}
	return outReported
}

// ready is a client of b once /readyz answers 200 (start-up work such as an
// index rebuild runs before), failing the test after a minute.
// vectorsLoaded waits until the log says the vectors loaded, and returns
// the process's exit error if it stopped instead.
func (b *liveBinary) vectorsLoaded(t *testing.T) error {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(b.Log(), `msg="vectors loaded"`) {
		select {
		case <-b.done:
			if err := b.cmd.Wait(); err != nil {
				return err
			}
			return errors.New("ctxd serve exited")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("vectors neither loaded nor failed; log:\n%s", b.Log())
		}
		time.Sleep(50 * time.Millisecond) // polling the log the test reads, not a guess
	}
	return nil
}

func (b *liveBinary) ready(t *testing.T, dir string) *testServer {
	t.Helper()
	c := b.client(t, dir)
	deadline := time.Now().Add(60 * time.Second)
	for c.do("GET", "/readyz", nil).Status != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("never ready; log:\n%s", b.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}
