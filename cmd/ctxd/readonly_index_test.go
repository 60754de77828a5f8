package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/server"
)

// A read-only index is not a damaged one: the server refuses to start,
// saying the index is not accessible (it called it corrupt, and tried to
// move it aside to rebuild it), verify --repair leaves it alone, and once it
// is writable again the same index serves. The index dir is bind-mounted
// read-only over itself (skipped where mounting is not allowed).
func TestReadOnlyIndexIsNotCorrupt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("mounts")
	}
	dir := t.TempDir()
	ts := startServer(t, dir)
	ts.store("s", msg("user", "the read-only index keeps the heron"))
	ts.Stop()
	idx := server.IndexPath(dir)
	if out, err := exec.Command("mount", "--bind", idx, idx).CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	mounted := true
	unmount := func() {
		if mounted {
			exec.Command("umount", idx).Run()
			mounted = false
		}
	}
	t.Cleanup(unmount)
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", idx).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	m := NewMain(testConfig(dir))
	err := m.Run(t.Context(), nil)
	if err == nil {
		m.Close()
		t.Fatal("server started on a read-only index")
	}
	if !strings.Contains(err.Error(), "not damaged") || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("start on a read-only index: %v, want it to say read-only and not damaged", err)
	}
	out, errOut, code := runBinaryCmd(t, "verify", "--repair", "--data-dir", dir)
	if code == 0 || !strings.Contains(out+errOut, "not damaged") || strings.Contains(out+errOut, "corrupt") {
		t.Fatalf("verify --repair on a read-only index exited %d:\n%s%s", code, out, errOut)
	}
	if broken, _ := filepath.Glob(idx + ".broken-*"); len(broken) > 0 {
		t.Fatalf("the read-only index was moved aside as broken: %v", broken)
	}
	unmount()
	ts = startServer(t, dir)
	if got := ts.search(map[string]any{"query": "heron"}); len(got) != 1 {
		t.Fatalf("after remounting rw: %d results", len(got))
	}
}
