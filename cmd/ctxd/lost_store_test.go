package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/server"
)

// A store lost (truncated to 0 bytes, or deleted) next to a data dir's
// index and cold mirror: the real binary refuses to start and says why,
// verify --repair neither runs on it nor, once an empty store exists,
// deletes the mirror files; --allow-empty-store starts empty on purpose;
// restore-cold brings the cold originals back from the mirror.
func TestLostStore(t *testing.T) {
	t.Parallel()
	dir, _ := populatedDir(t)
	for _, tc := range []struct {
		name string
		lose func(path string) error
	}{
		{"truncated", func(p string) error { return os.Truncate(p, 0) }},
		{"deleted", os.Remove},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := t.TempDir()
			copyDir(t, dir, d)
			if err := tc.lose(server.StorePath(d)); err != nil {
				t.Fatal(err)
			}
			cold := dirState(t, server.ColdPath(d))
			storeBefore := dirState(t, d)[filepath.Base(server.StorePath(d))]

			b, err := runBinary(t, d)
			if err == nil {
				b.Stop(t)
				t.Fatal("ctxd serve started on a lost store")
			}
			for _, want := range []string{"store was lost", "--allow-empty-store", "restore-cold", "cold mirror holds 2 session files", "full-text index holds"} {
				if !strings.Contains(b.Log(), want) {
					t.Errorf("refusal lacks %q:\n%s", want, b.Log())
				}
			}
			if got := dirState(t, d)[filepath.Base(server.StorePath(d))]; got != storeBefore {
				t.Errorf("the refused start wrote the store")
			}
			if out, errOut, code := runBinaryCmd(t, "verify", "--repair", "--data-dir", d); code == 0 {
				t.Errorf("verify --repair on a lost store exited 0:\n%s%s", out, errOut)
			}
			sameState(t, "verify --repair on a lost store", cold, dirState(t, server.ColdPath(d)))

			// Empty on purpose: it starts, and serves nothing.
			b = mustRunBinary(t, d, "--allow-empty-store")
			c := b.client(t, d)
			c.mustDo(200, "GET", "/readyz", nil)
			if s := c.mustDo(200, "GET", "/v1/sessions", nil)["sessions"].([]any); len(s) != 0 {
				t.Errorf("sessions on an empty store: %v", s)
			}
			b.Stop(t)
			// The store is a new empty one now, and the mirror still holds data.
			if b, err := runBinary(t, d); err == nil || !strings.Contains(b.Log(), "store was lost") {
				if err == nil {
					b.Stop(t)
				}
				t.Fatalf("ctxd serve on a new empty store next to the mirror: %v\n%s", err, b.Log())
			}
			out, _, code := runBinaryCmd(t, "verify", "--repair", "--data-dir", d)
			if code == 0 || !strings.Contains(out, "cold_orphan_file") {
				t.Errorf("verify --repair on an empty store exited %d:\n%s", code, out)
			}
			sameState(t, "verify --repair on an empty store", cold, dirState(t, server.ColdPath(d)))

			// The mirror brings the cold originals back.
			out, errOut, code := runBinaryCmd(t, "restore-cold", "--data-dir", d)
			if code != 0 || !strings.Contains(out, "restored 2 sessions") {
				t.Fatalf("restore-cold exited %d:\n%s%s", code, out, errOut)
			}
			if out, errOut, code := runBinaryCmd(t, "verify", "--data-dir", d); code != 0 {
				t.Errorf("verify after restore-cold exited %d:\n%s%s", code, out, errOut)
			}
			b = mustRunBinary(t, d)
			c = b.client(t, d)
			for _, s := range []string{"alpha", "gamma"} {
				lines := readLines(t, coldFile(d, s))
				chunks := c.mustDo(200, "GET", "/v1/sessions/"+s+"/cold?limit=1000", nil)["chunks"].([]any)
				if len(chunks) != len(lines) {
					t.Errorf("%s: %d cold chunks served after the restore, the mirror has %d lines", s, len(chunks), len(lines))
				}
			}
			var line struct {
				ID      string `json:"chunk_id"`
				Content string `json:"content"`
			}
			if err := json.Unmarshal([]byte(readLines(t, coldFile(d, "gamma"))[0]), &line); err != nil {
				t.Fatal(err)
			}
			got := idsOf(c.search(map[string]any{"query": line.Content, "mode": "text", "k": 20, "sessions": []string{"gamma"},
				"states": []string{"dropped", "summarized"}}))
			if !contains(got, line.ID) {
				t.Errorf("text search for a restored cold original's content = %v, want %s among them", got, line.ID)
			}
			b.Stop(t)
		})
	}
}
