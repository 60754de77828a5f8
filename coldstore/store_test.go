package coldstore

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// equalChunk compares chunks as they would be written: Read gives back
// json.Number metadata and UTC-less times that mean the same.
func equalChunk(a, b Chunk) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func equalChunks(t *testing.T, got, want []Chunk) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d chunks, want %d", len(got), len(want))
	}
	for i := range want {
		if !equalChunk(got[i], want[i]) {
			t.Fatalf("chunk %d =\n%+v\nwant\n%+v", i, got[i], want[i])
		}
	}
}

func chunk(tenant, session, id string) Chunk {
	at := time.Date(2025, 4, 1, 8, 0, 0, 123, time.UTC)
	return Chunk{
		ChunkID: id, Tenant: tenant, SessionID: session, Timestamp: at,
		Content: "line one\nline two <b>&\"quoted\" ünï " + id, Tokens: 12, Role: memory.RoleAssistant,
		DropReason: memory.ReasonLowRelevance, RelevanceScore: 0.125, Threshold: 0.25,
		PromptAtDrop: "what now?", DroppedAt: at.Add(time.Minute), RecoverableUntil: at.Add(48 * time.Hour),
		Metadata: map[string]any{"n": 3, "big": int64(1) << 60, "f": 1.5, "s": "x", "b": true},
	}
}

func chunks(tenant, session string, ids ...string) []Chunk {
	var out []Chunk
	for _, id := range ids {
		out = append(out, chunk(tenant, session, id))
	}
	return out
}

type counts struct {
	mu              sync.Mutex
	syncFile, syncD int
	dirs            []string
}

// instrument counts fsyncs while still doing them.
func instrument(s *Store) *counts {
	c := &counts{}
	s.fs.syncFile = func(f *os.File) error {
		c.mu.Lock()
		c.syncFile++
		c.mu.Unlock()
		return f.Sync()
	}
	s.fs.syncDir = func(p string) error {
		c.mu.Lock()
		c.syncD++
		c.dirs = append(c.dirs, p)
		c.mu.Unlock()
		return realFS.syncDir(p)
	}
	return c
}

func (c *counts) take() (files, dirs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	files, dirs = c.syncFile, c.syncD
	c.syncFile, c.syncD, c.dirs = 0, 0, nil
	return files, dirs
}

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "cold"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAppendReadRoundTrip(t *testing.T) {
	s := openStore(t)
	first := chunks("acme", "s:1", "a", "b")
	if err := s.Append("acme", "s:1", first); err != nil {
		t.Fatal(err)
	}
	// Tenant and session may be left for Append to fill in.
	second := chunks("", "", "c")
	if err := s.Append("acme", "s:1", second); err != nil {
		t.Fatal(err)
	}
	got, err := s.Read("acme", "s:1")
	if err != nil {
		t.Fatal(err)
	}
	second[0].Tenant, second[0].SessionID = "acme", "s:1"
	equalChunks(t, got, append(first, second...))
	if n, _ := got[0].Metadata["big"].(json.Number).Int64(); n != 1<<60 {
		t.Fatalf("big metadata integer = %v", got[0].Metadata["big"])
	}

	raw := plainText(t, filepath.Join(s.dir, "acme", "s%3A1.jsonl.gz"))
	if lines := strings.Count(string(raw), "\n"); lines != 3 {
		t.Fatalf("file has %d lines, want 3:\n%s", lines, raw)
	}
	if !strings.Contains(string(raw), `<b>&`) || !strings.Contains(string(raw), `"drop_reason":"low_relevance"`) {
		t.Fatalf("file is not as people read it:\n%s", raw)
	}

	if got, err := s.Read("acme", "nope"); got != nil || err != nil {
		t.Fatalf("Read(missing) = %v, %v", got, err)
	}
	if err := s.Append("acme", "s:1", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Append("acme", "s:2", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "acme", "s%3A2.jsonl.gz")); !os.IsNotExist(err) {
		t.Fatal("Append(no chunks) made a file")
	}

	for _, bad := range [][]Chunk{
		chunks("other", "s:1", "x"),
		chunks("acme", "s:9", "x"),
		{{Tenant: "acme", SessionID: "s:1"}},
	} {
		if err := s.Append("acme", "s:1", bad); err == nil {
			t.Errorf("Append(%+v) accepted", bad[0])
		}
	}
	nan := chunk("acme", "s:1", "nan")
	nan.RelevanceScore = math.NaN()
	if err := s.Append("acme", "s:1", []Chunk{nan}); err == nil {
		t.Error("Append(NaN score) accepted")
	}
	if got, err := s.Read("acme", "s:1"); err != nil || len(got) != 3 {
		t.Fatalf("refused appends changed the file: %d chunks, %v", len(got), err)
	}
}

func TestFsyncPath(t *testing.T) {
	s := openStore(t)
	c := instrument(s)

	if err := s.Append("t", "s", chunks("t", "s", "1")); err != nil {
		t.Fatal(err)
	}
	if f, d := c.take(); f != 1 || d != 2 {
		t.Fatalf("new file: %d file syncs, %d dir syncs; want 1 and 2 (tenant dir, root)", f, d)
	}
	if err := s.Append("t", "s", chunks("t", "s", "2")); err != nil {
		t.Fatal(err)
	}
	if f, d := c.take(); f != 1 || d != 0 {
		t.Fatalf("existing file: %d file syncs, %d dir syncs; want 1 and 0", f, d)
	}
	if err := s.Rewrite("t", "s", chunks("t", "s", "3")); err != nil {
		t.Fatal(err)
	}
	if f, d := c.take(); f != 1 || d != 1 {
		t.Fatalf("rewrite: %d file syncs, %d dir syncs; want 1 and 1", f, d)
	}
	if err := s.Rewrite("t", "new", chunks("t", "new", "4")); err != nil {
		t.Fatal(err)
	}
	if f, d := c.take(); f != 1 || d != 2 {
		t.Fatalf("rewrite to a new file: %d file syncs, %d dir syncs; want 1 and 2", f, d)
	}
	if err := s.Remove("t", "s"); err != nil {
		t.Fatal(err)
	}
	if f, d := c.take(); f != 0 || d != 1 {
		t.Fatalf("remove: %d file syncs, %d dir syncs; want 0 and 1", f, d)
	}

	// A failed fsync is a failed Append: the compaction must not be acknowledged.
	boom := errors.New("fsync: EIO")
	s.fs.syncFile = func(*os.File) error { return boom }
	if err := s.Append("t", "s", chunks("t", "s", "5")); !errors.Is(err, boom) {
		t.Fatalf("Append with failing fsync = %v, want %v", err, boom)
	}
	s.fs.syncFile = realFS.syncFile
	s.fs.syncDir = func(string) error { return boom }
	if err := s.Append("t", "fresh", chunks("t", "fresh", "6")); !errors.Is(err, boom) {
		t.Fatalf("Append to new file with failing dir fsync = %v, want %v", err, boom)
	}
}

func writeRaw(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// appendSegment appends text to a file as one gzip segment, as Append would.
func appendSegment(t *testing.T, path, text string) {
	t.Helper()
	seg, err := compressSegment([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, path, string(seg))
}

// plainText is what zcat prints for a file: read with the standard
// library's gzip, which reads concatenated members as one stream.
func plainText(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s is not a gzip file zcat reads: %v", path, err)
	}
	return b
}

func TestTruncatedLastLine(t *testing.T) {
	s := openStore(t)
	want := chunks("t", "s", "1", "2", "3")
	if err := s.Append("t", "s", want); err != nil {
		t.Fatal(err)
	}
	_, path, _ := s.paths("t", "s")
	line, _ := json.Marshal(chunk("t", "s", "4"))
	seg, _ := compressSegment(append(line, '\n'))
	torn := string(seg[:len(seg)/2])
	writeRaw(t, path, torn) // a crash half way through an append

	got, err := s.Read("t", "s")
	var dmg *DamageError
	if !errors.As(err, &dmg) {
		t.Fatalf("Read(torn) error = %v, want *DamageError", err)
	}
	if dmg.TornBytes != len(torn) || len(dmg.BadLines) != 0 || dmg.BadSegments != 0 || dmg.Path != path {
		t.Fatalf("damage = %+v, want %d torn bytes and nothing else", dmg, len(torn))
	}
	equalChunks(t, got, want)
	// Cut within the magic bytes too.
	os.Truncate(path, 0)
	writeRaw(t, path, string(seg[:1]))
	if got, err := s.Read("t", "s"); !errors.As(err, &dmg) || dmg.TornBytes != 1 || dmg.BadSegments != 0 || len(got) != 0 {
		t.Fatalf("Read(one byte of a segment) = %d chunks, %v", len(got), err)
	}

	// Even a whole object without its newline is an append that did not finish.
	os.Truncate(path, 0)
	appendSegment(t, path, string(line))
	if got, err := s.Read("t", "s"); !errors.As(err, &dmg) || dmg.TornBytes != len(line) || len(got) != 0 {
		t.Fatalf("Read(only a torn line) = %d chunks, %v", len(got), err)
	}

	// The next Append drops the torn bytes instead of hiding its segment
	// behind them.
	os.Truncate(path, 0)
	if err := s.Append("t", "s", want); err != nil {
		t.Fatal(err)
	}
	writeRaw(t, path, torn)
	if err := s.Append("t", "s", chunks("t", "s", "5")); err != nil {
		t.Fatal(err)
	}
	got, err = s.Read("t", "s")
	if err != nil {
		t.Fatalf("Read after healing append: %v", err)
	}
	equalChunks(t, got, append(want, chunk("t", "s", "5")))
	if n := bytes.Count(plainText(t, path), []byte("\n")); n != 4 {
		t.Fatalf("zcat reads %d lines, want 4", n)
	}

	// Bad complete lines are reported by number, the rest still read.
	other, _ := json.Marshal(chunk("t", "other", "x"))
	appendSegment(t, path, "not json\n"+string(other)+"\n{}\n"+string(line)+string(line)+"\n")
	if err := s.Append("t", "s", chunks("t", "s", "6")); err != nil {
		t.Fatal(err)
	}
	got, err = s.Read("t", "s")
	if !errors.As(err, &dmg) || dmg.TornBytes != 0 || fmt.Sprint(dmg.BadLines) != "[5 6 7 8]" {
		t.Fatalf("Read(bad lines) error = %v (%+v)", err, dmg)
	}
	if len(got) != 5 || got[4].ChunkID != "6" {
		t.Fatalf("Read(bad lines) = %d chunks", len(got))
	}

	// verify's repair: rewrite with what is good.
	if err := s.Rewrite("t", "s", got); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Read("t", "s"); err != nil || len(again) != 5 {
		t.Fatalf("after repair: %d chunks, %v", len(again), err)
	}
}

func TestRewriteAtomic(t *testing.T) {
	s := openStore(t)
	old := chunks("t", "s", "1", "2")
	if err := s.Append("t", "s", old); err != nil {
		t.Fatal(err)
	}
	_, path, _ := s.paths("t", "s")
	before, _ := os.ReadFile(path)

	boom := errors.New("disk full")
	failures := map[string]func(){
		"write": func() {
			s.fs.write = func(f *os.File, b []byte) (int, error) {
				n, _ := f.Write(b[:len(b)/2])
				return n, boom
			}
		},
		"sync": func() { s.fs.syncFile = func(*os.File) error { return boom } },
	}
	for name, inject := range failures {
		inject()
		err := s.Rewrite("t", "s", chunks("t", "s", "new1", "new2", "new3"))
		s.fs = realFS
		if !errors.Is(err, boom) {
			t.Fatalf("%s failure: Rewrite = %v, want %v", name, err, boom)
		}
		after, _ := os.ReadFile(path)
		if string(after) != string(before) {
			t.Fatalf("%s failure: old file changed", name)
		}
		assertNoTemp(t, s)
	}
	got, err := s.Read("t", "s")
	if err != nil {
		t.Fatal(err)
	}
	equalChunks(t, got, old)

	// And when nothing fails, the new content replaces the old.
	repl := chunks("t", "s", "r")
	if err := s.Rewrite("t", "s", repl); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Read("t", "s")
	equalChunks(t, got, repl)
	assertNoTemp(t, s)

	// Rewriting to nothing removes the session.
	if err := s.Rewrite("t", "s", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("Rewrite(nil) left the file: %v", err)
	}
}

func TestAppendFailureLeavesFileWhole(t *testing.T) {
	s := openStore(t)
	old := chunks("t", "s", "1")
	if err := s.Append("t", "s", old); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	s.fs.write = func(f *os.File, b []byte) (int, error) {
		n, _ := f.Write(b[:len(b)/2])
		return n, boom
	}
	if err := s.Append("t", "s", chunks("t", "s", "2", "3")); !errors.Is(err, boom) {
		t.Fatalf("Append = %v, want %v", err, boom)
	}
	if err := s.Append("t", "new", chunks("t", "new", "2")); !errors.Is(err, boom) {
		t.Fatalf("Append(new) = %v, want %v", err, boom)
	}
	s.fs = realFS
	got, err := s.Read("t", "s")
	if err != nil {
		t.Fatalf("partial append left damage: %v", err)
	}
	equalChunks(t, got, old)
	if refs, _ := s.Sessions(); len(refs) != 1 {
		t.Fatalf("failed first append left a file: %v", refs)
	}
}

func assertNoTemp(t *testing.T, s *Store) {
	t.Helper()
	tmps, _ := filepath.Glob(filepath.Join(s.dir, "*", tmpPrefix+"*"))
	if len(tmps) != 0 {
		t.Fatalf("temporary files left: %v", tmps)
	}
}

func TestSessionsRemoveSize(t *testing.T) {
	s := openStore(t)
	var want []SessionRef
	for _, tenant := range []string{"..", "a/b", "%2F", "日本語", "default", "Z"} {
		for _, session := range []string{"s:1", "01HX.a", "b"} {
			if err := s.Append(tenant, session, chunks(tenant, session, "c")); err != nil {
				t.Fatal(err)
			}
			want = append(want, SessionRef{tenant, session})
		}
	}
	// Things coldstore did not write are not sessions.
	os.WriteFile(filepath.Join(s.dir, "stray.txt"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(s.dir, "default", "notes.txt"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(s.dir, "default", "%2f.jsonl"), []byte("x"), 0o600)
	os.Mkdir(filepath.Join(s.dir, "default", "dir.jsonl"), 0o700)
	os.Mkdir(filepath.Join(s.dir, "lower%2f"), 0o700)

	got, err := s.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(sorted(want)) {
		t.Fatalf("Sessions =\n%v\nwant\n%v", got, sorted(want))
	}
	for _, ref := range got {
		if cs, err := s.Read(ref.Tenant, ref.Session); err != nil || len(cs) != 1 || cs[0].Tenant != ref.Tenant {
			t.Fatalf("Read(%q, %q) = %v, %v", ref.Tenant, ref.Session, cs, err)
		}
	}

	for _, session := range []string{"s:1", "01HX.a", "b", "b"} {
		if err := s.Remove("a/b", session); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.dir, escape("a/b"))); !os.IsNotExist(err) {
		t.Fatalf("empty tenant directory kept: %v", err)
	}
	if err := s.Remove("default", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "default")); err != nil {
		t.Fatalf("tenant directory with files left removed: %v", err)
	}
	got, _ = s.Sessions()
	if len(got) != len(want)-4 {
		t.Fatalf("after removes: %d sessions, want %d", len(got), len(want)-4)
	}
}

func sorted(refs []SessionRef) []SessionRef {
	out := append([]SessionRef(nil), refs...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			a, b := out[i], out[j]
			if b.Tenant < a.Tenant || b.Tenant == a.Tenant && b.Session < a.Session {
				out[i], out[j] = b, a
			}
		}
	}
	return out
}

func TestOpenRemovesStaleTemp(t *testing.T) {
	s := openStore(t)
	if err := s.Append("t", "s", chunks("t", "s", "1")); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(s.dir, "t", tmpPrefix+"123")
	os.WriteFile(stale, []byte("half"), 0o600)
	if _, err := Open(s.dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temp file kept: %v", err)
	}
	if got, err := s.Read("t", "s"); err != nil || len(got) != 1 {
		t.Fatalf("Read = %d chunks, %v", len(got), err)
	}
}

func TestConcurrent(t *testing.T) {
	s := openStore(t)
	const sessions, writers, each = 4, 4, 25
	var wg sync.WaitGroup
	for si := range sessions {
		session := fmt.Sprintf("s%d", si)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if err := s.Append("t", session, chunks("t", session, fmt.Sprintf("%d-%d", w, i))); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		// A reader never sees a half-written append.
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := 0
			for range 20 {
				cs, err := s.Read("t", session)
				if err != nil || len(cs) < last {
					t.Errorf("Read(%s) = %d chunks after %d, %v", session, len(cs), last, err)
					return
				}
				last = len(cs)
			}
		}()
	}
	// A reader of a session being rewritten sees one whole version or another.
	versions := [][]Chunk{chunks("t", "r", "a"), chunks("t", "r", "b", "c"), chunks("t", "r", "d", "e", "f")}
	if err := s.Rewrite("t", "r", versions[0]); err != nil {
		t.Fatal(err)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 30 {
			if err := s.Rewrite("t", "r", versions[i%len(versions)]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 30 {
			cs, err := s.Read("t", "r")
			if err != nil || len(cs) == 0 || !equalChunk(cs[0], versions[len(cs)-1][0]) {
				t.Errorf("Read(r) = %d chunks, %v", len(cs), err)
				return
			}
		}
	}()
	// Another tenant comes and goes, racing tenant directory cleanup.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 50 {
			session := fmt.Sprint(i % 2)
			if err := s.Append("gone", session, chunks("gone", session, "x")); err != nil {
				t.Error(err)
				return
			}
			if err := s.Remove("gone", session); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	for si := range sessions {
		got, err := s.Read("t", fmt.Sprintf("s%d", si))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != writers*each {
			t.Fatalf("session %d: %d chunks, want %d", si, len(got), writers*each)
		}
	}
	if len(s.locks.m) != 0 {
		t.Fatalf("%d session locks left", len(s.locks.m))
	}
}

func TestMirror(t *testing.T) {
	s := openStore(t)
	m := Mirror{s}
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	msg := func(id string) *memory.Message {
		return &memory.Message{ID: id, SessionID: "s", Role: memory.RoleUser, Content: id, CreatedAt: at,
			Cold: &memory.ColdInfo{DropReason: memory.ReasonBudget, DroppedAt: at, RecoverableUntil: at.Add(time.Hour)}}
	}
	if err := m.Append("t", "s", []*memory.Message{msg("a"), msg("b")}); err != nil {
		t.Fatal(err)
	}
	if err := m.Rewrite("t", "s", []*memory.Message{msg("b")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Read("t", "s")
	if err != nil || len(got) != 1 || got[0].ChunkID != "b" || got[0].Tenant != "t" || got[0].DropReason != memory.ReasonBudget {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	if err := m.Remove("t", "s"); err != nil {
		t.Fatal(err)
	}
	if refs, _ := s.Sessions(); len(refs) != 0 {
		t.Fatalf("Sessions after Remove = %v", refs)
	}
}
