package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tmpfs mounts a size-limited tmpfs for disk-full and read-only tests; it
// skips the test where mounting is not allowed (not root, no CAP_SYS_ADMIN).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

func remount(t *testing.T, dir, opts string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+opts, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v: %s", dir, opts, err, out)
	}
}

// A full disk answers 503 with a clear message, never 500, and loses no
// acknowledged write: after the disk grows, everything acknowledged is there.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	// 16 MB fill in ~110 calls of 100 messages: compressed records (with
	// the race detector's slow zstd) took 230 calls to fill 32 MB.
	dir := tmpfs(t, "16m")
	ts := startServer(t, dir, func(c *Config) { c.DiskReservePct = 0.1 })
	acked := map[string][]string{}
	refused := 0
	for i := 0; i < 500 && refused < 3; i++ {
		// A new session each time: no compaction, only growth.
		session := fmt.Sprintf("full%d", i)
		var batch []any
		for j := range 100 {
			batch = append(batch, msg("user", fmt.Sprintf("call %d message %d %s", i, j, chatter(i*100+j))))
		}
		r := ts.do("POST", "/v1/sessions/"+session+"/messages", map[string]any{"messages": batch})
		switch {
		case r.Status == 201:
			for _, id := range r.Body["ids"].([]any) {
				acked[session] = append(acked[session], id.(string))
			}
		case r.Status == 503 && r.errCode() == "unavailable" && strings.Contains(r.Body["error"].(map[string]any)["message"].(string), "disk"):
			refused++
			if r := ts.do("GET", "/v1/sessions/"+session, nil); r.Status != 404 {
				t.Fatalf("a refused write created its session: %d", r.Status)
			}
		default:
			t.Fatalf("write %d on a filling disk: %d %s, want 201 or 503 naming the disk", i, r.Status, r.Raw)
		}
	}
	if refused == 0 {
		t.Fatalf("the disk never filled after %d writes", len(acked))
	}
	// Reads, searches and deletes still work on a full disk.
	ts.mustDo(200, "GET", "/v1/sessions/full0", nil)
	ts.search(map[string]any{"query": "call 0 message 1"})
	ts.mustDo(204, "DELETE", "/v1/sessions/full0", nil)
	delete(acked, "full0")
	ts.Stop()
	remount(t, dir, "size=400m")
	ts2 := startServer(t, dir)
	for session, ids := range acked {
		checkReachable(t, ts2, session, ids)
	}
	ts2.store("full1", msg("user", "room again"))
	t.Logf("%d calls acknowledged before the disk filled, %d refused with 503; all acknowledged present after it grew", len(acked)+1, refused)
}

// A read-only data dir fails at start with a message that says so.
func TestReadOnlyDataDir(t *testing.T) {
	t.Parallel()
	dir := tmpfs(t, "64m")
	ts := startServer(t, dir)
	ts.store("s", msg("user", "written before the disk went read-only"))
	ts.Stop()
	remount(t, dir, "ro")
	m := NewMain(testConfig(dir))
	err := m.Run(t.Context(), nil)
	if err == nil {
		m.Close()
		t.Fatal("server started on a read-only data dir")
	}
	if !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("start on a read-only dir: %v, want it to say read-only", err)
	}
	remount(t, dir, "rw")
	ts2 := startServer(t, dir)
	if got := ts2.search(map[string]any{"query": "read-only disk"}); len(got) != 1 {
		t.Fatalf("after remounting rw: %d results", len(got))
	}
}

// A cold mirror file cut mid-line (a crash, a bad disk) does not stop the
// server; the next compaction appends cleanly after the torn bytes.
func TestTruncatedColdFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ts.mustDo(200, "PUT", "/v1/sessions/c", map[string]any{"context_window": 1500})
	for i := range 40 {
		ts.store("c", msg("user", chatter(i)))
	}
	ts.Stop()
	files, _ := filepath.Glob(filepath.Join(dir, "cold", "*", "*"))
	if len(files) == 0 {
		t.Fatal("no cold file written")
	}
	fi, _ := os.Stat(files[0])
	if err := os.Truncate(files[0], fi.Size()-7); err != nil {
		t.Fatal(err)
	}
	ts2 := startServer(t, dir)
	before := ts2.mustDo(200, "GET", "/v1/sessions/c/cold?limit=1000", nil)
	for i := 40; i < 80; i++ {
		ts2.store("c", msg("user", chatter(i)))
	}
	after := ts2.mustDo(200, "GET", "/v1/sessions/c/cold?limit=1000", nil)
	if len(after["chunks"].([]any)) <= len(before["chunks"].([]any)) {
		t.Fatalf("no new cold chunks after the truncation: %d then %d", len(before["chunks"].([]any)), len(after["chunks"].([]any)))
	}
}

// fillDisk writes a file into dir until the disk is full: not one byte is
// left for the server, as when another process fills the disk.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for size := len(buf); size > 0; {
		if _, err := f.Write(buf[:size]); err != nil {
			size /= 2 // the last free blocks, with smaller and smaller writes
		}
	}
}

// On a truly full disk (0 bytes free, filled by someone else) sessions can
// still be deleted, which is how space is freed: the first delete gives the
// store's spare file back. Without it (--disk-spare 0) bbolt found no free
// page for the delete's transaction and DELETE answered 503. After a
// restart, what was not deleted is all there.
func TestDeleteOnTrulyFullDisk(t *testing.T) {
	t.Parallel()
	dir := tmpfs(t, "32m")
	ts := startServer(t, dir)
	var keep []string
	for i := range 6 {
		var batch []map[string]any
		for j := range 1000 {
			batch = append(batch, msg("user", fmt.Sprintf("session %d message %d %s %s", i, j, chatter(i*1000+j), chatter(j))))
		}
		ids := ts.store(fmt.Sprintf("big%d", i), batch...)
		if i == 5 {
			keep = ids
		}
	}
	// Stopped first, so that no background work (index merges) frees
	// space after the disk is filled.
	ts.Stop()
	fillDisk(t, dir)
	ts = startServer(t, dir)
	for i := range 5 {
		ts.mustDo(204, "DELETE", fmt.Sprintf("/v1/sessions/big%d", i), nil)
		ts.mustDo(404, "GET", fmt.Sprintf("/v1/sessions/big%d", i), nil)
	}
	// The operator frees space: the index, which could not flush its
	// deletions onto the full disk, then can as the server stops.
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	ts.Stop()
	ts2 := startServer(t, dir)
	checkReachable(t, ts2, "big5", keep)
	ts2.mustDo(404, "GET", "/v1/sessions/big0", nil)
}
