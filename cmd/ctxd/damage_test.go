package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/server"
	bolt "go.etcd.io/bbolt"
)

// runBinaryCmd runs the real binary with args and returns its output and
// exit code: a panic is a process's death, which only the process shows.
func runBinaryCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(ctxdBinary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errb.String(), "panic:") || strings.Contains(errb.String(), "goroutine ") {
		t.Fatalf("ctxd %s panicked:\n%s", strings.Join(args, " "), errb.String())
	}
	return out.String(), errb.String(), code
}

// dirState is every file of a data dir with a hash of its bytes.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameState(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed %s", what, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s created %s", what, p)
		}
	}
}

// recordOffset is where the stored record of message id starts in the
// stopped server's ctxd.db, and its length.
func recordOffset(t *testing.T, dir, id string) (int, int) {
	t.Helper()
	db, err := bolt.Open(server.StorePath(dir), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var rec []byte
	err = db.View(func(tx *bolt.Tx) error {
		key := tx.Bucket([]byte("ids")).Get([]byte(id))
		rec = bytes.Clone(tx.Bucket([]byte("messages")).Get(key))
		return nil
	})
	db.Close()
	if err != nil || len(rec) == 0 {
		t.Fatalf("record of %s: %v", id, err)
	}
	file, err := os.ReadFile(server.StorePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Index(file, rec)
	if off < 0 || bytes.Contains(file[off+1:], rec) {
		t.Fatalf("record of %s not found once in the file", id)
	}
	return off, len(rec)
}

// damageByte flips one byte of the stopped server's ctxd.db in place.
func damageByte(t *testing.T, dir string, off int) {
	t.Helper()
	damageFileByte(t, server.StorePath(dir), int64(off))
}

// damageFileByte flips a bit of the byte at off in the file at path.
func damageFileByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// populatedDir is a stopped server's data dir with populate's sessions,
// and delta's messages (their ids returned) when given. Tests that use it
// run the real binary: skipped with -short.
func populatedDir(t *testing.T, delta ...map[string]any) (string, []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real binary")
	}
	dir := t.TempDir()
	ts := startServer(t, dir)
	populate(t, ts)
	var ids []string
	if len(delta) > 0 {
		ids = ts.store("delta", delta...)
	}
	ts.Stop()
	return dir, ids
}

// One changed byte inside a message's record on disk: the real server
// answers that message, and the listing of its session, with a 500
// data_damaged naming it, and serves everything else; `verify` (which
// only reads) reports it by id and exits 1.
func TestDamagedRecordNamed(t *testing.T) {
	t.Parallel()
	dir, ids := populatedDir(t, msg("user", "the capybara naps"), msg("assistant", "the capybara wakes at noon"))
	off, n := recordOffset(t, dir, ids[1])
	damageByte(t, dir, off+n-3)

	b := mustRunBinary(t, dir)
	c := b.client(t, dir)
	for _, path := range []string{"/v1/messages/" + ids[1], "/v1/sessions/delta/messages"} {
		r := c.do("GET", path, nil)
		if r.Status != 500 || r.errCode() != "data_damaged" {
			t.Fatalf("GET %s = %d %s, want 500 data_damaged", path, r.Status, r.Raw)
		}
		if msg := r.Body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "delta") || !strings.Contains(msg, "damaged") {
			t.Errorf("GET %s: message does not name the damaged record: %q", path, msg)
		}
	}
	if r := c.do("GET", "/v1/messages/"+ids[1], nil); !strings.Contains(string(r.Raw), ids[1]) {
		t.Errorf("the error for a message read by id does not name it: %s", r.Raw)
	}
	c.mustDo(200, "GET", "/v1/messages/"+ids[0], nil)
	c.mustDo(200, "GET", "/v1/sessions/beta/messages", nil)
	if got := c.search(map[string]any{"query": "penguins", "mode": "text", "k": 3}); len(got) == 0 {
		t.Error("search of an undamaged session found nothing")
	}
	c.mustDo(200, "GET", "/readyz", nil)
	b.Stop(t)

	before := dirState(t, dir)
	out, _, code := runBinaryCmd(t, "verify", "--data-dir", dir)
	if code != 1 || !strings.Contains(out, "record_damaged") || !strings.Contains(out, ids[1]) || !strings.Contains(out, "checksum mismatch") {
		t.Fatalf("verify exited %d:\n%s", code, out)
	}
	sameState(t, "verify", before, dirState(t, dir))

	// Deleting the session is how the damaged record goes; the rest stays.
	b = mustRunBinary(t, dir)
	c = b.client(t, dir)
	c.mustDo(204, "DELETE", "/v1/sessions/delta", nil)
	b.Stop(t)
	if out, _, code := runBinaryCmd(t, "verify", "--data-dir", dir); code != 0 {
		t.Fatalf("verify after deleting the damaged session exited %d:\n%s", code, out)
	}
}

// verify without --repair changes nothing in the data dir, even a corrupt
// or missing index, which it reports; --repair then rebuilds it.
func TestVerifyOnlyReads(t *testing.T) {
	t.Parallel()
	dir, _ := populatedDir(t)
	cases := []struct {
		name   string
		damage func(idx string)
	}{
		{"corrupt", func(idx string) {
			filepath.WalkDir(idx, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					err = os.WriteFile(path, []byte("not an index"), 0o600)
				}
				return err
			})
		}},
		{"missing", func(idx string) { os.RemoveAll(idx) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			copyDir(t, dir, d)
			tc.damage(filepath.Join(d, "index"))
			before := dirState(t, d)
			out, _, code := runBinaryCmd(t, "verify", "--data-dir", d)
			if code != 1 || !strings.Contains(out, "index_unusable") {
				t.Fatalf("verify of a %s index exited %d:\n%s", tc.name, code, out)
			}
			sameState(t, "verify", before, dirState(t, d))
			if out, _, code := runBinaryCmd(t, "verify", "--data-dir", d, "--repair"); code != 0 || !strings.Contains(out, "consistent") {
				t.Fatalf("verify --repair exited %d:\n%s", code, out)
			}
			if out, errOut, code := runBinaryCmd(t, "verify", "--data-dir", d); code != 0 {
				t.Fatalf("verify after the repair exited %d:\n%s%s", code, out, errOut)
			}
		})
	}
}

// A corrupt bbolt page is reported by verify as store_corrupt, not a
// panic, and changes nothing; the server that opens such a store answers
// what touches the page with a JSON 5xx and keeps answering the rest.
func TestCorruptStorePageReported(t *testing.T) {
	t.Parallel()
	dir, ids := populatedDir(t, msg("user", "the capybara naps"))
	off, _ := recordOffset(t, dir, ids[0])
	// The header of the leaf page that holds the record: its id, flags
	// and count are garbage now.
	const pageSize = 4096
	page := off / pageSize * pageSize
	f, err := os.OpenFile(server.StorePath(dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xEE}, 16), int64(page)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	before := dirState(t, dir)
	out, _, code := runBinaryCmd(t, "verify", "--data-dir", dir)
	if code != 1 || !strings.Contains(out, "store_corrupt") {
		t.Fatalf("verify of a corrupt page exited %d:\n%s", code, out)
	}
	sameState(t, "verify", before, dirState(t, dir))

	b, err := runBinary(t, dir)
	if err != nil {
		t.Fatalf("ctxd serve on a store with a corrupt page: %v\n%s", err, b.Log())
	}
	c := b.client(t, dir)
	for range 2 { // and the process is still there to answer again
		r := c.do("GET", "/v1/sessions/delta/messages", nil)
		if r.Status != 500 || r.errCode() != "data_damaged" {
			t.Fatalf("GET the messages on the corrupt page = %d %s, want 500 data_damaged", r.Status, r.Raw)
		}
	}
	c.mustDo(200, "GET", "/healthz", nil)
	b.Stop(t)
}
