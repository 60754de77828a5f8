package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/memory"
)

// writeBatches stores n batches of 100 messages in session "big"; first and
// last, when not empty, are words only the first and the last batch carry.
func writeBatches(ts *testServer, from, n int, first, last string) {
	for b := from; b < from+n; b++ {
		msgs := make([]map[string]any, 100)
		for i := range msgs {
			msgs[i] = msg("user", fmt.Sprintf("note %d of batch %d about the herd", i, b))
		}
		if b == from && first != "" {
			msgs[0] = msg("user", "the "+first+" grazes by the river")
		}
		if b == from+n-1 && last != "" {
			msgs[99] = msg("user", "a "+last+" surfaced at dawn")
		}
		ts.store("big", msgs...)
	}
}

// A lost, empty, behind, holey or corrupt full-text index is rebuilt from the store
// before the real binary answers /readyz, even though the change log was
// trimmed (as the maintain loop does), and the log says so.
func TestIndexRebuiltAtStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the real binary four times")
	}
	base := t.TempDir()
	oldIndex := filepath.Join(t.TempDir(), "index")
	ts := startServer(t, base)
	ts.store("gone", msg("user", "the quagga left the herd"))
	writeBatches(ts, 0, 6, "okapi", "")
	ts.Stop()
	copyDir(t, filepath.Join(base, "index"), oldIndex) // an index that will be behind
	ts = startServer(t, base)
	writeBatches(ts, 6, 5, "", "narwhal")
	ts.store("small", msg("user", "the walrus sleeps"))
	ts.mustDo(204, "DELETE", "/v1/sessions/gone", nil)
	ts.Stop()
	last := trimChangeLog(t, base)

	cases := map[string]func(t *testing.T, idx string){
		"missing": func(t *testing.T, idx string) {
			if err := os.RemoveAll(idx); err != nil {
				t.Fatal(err)
			}
		},
		"empty": func(t *testing.T, idx string) {
			// An index that claims every change but holds no document.
			if err := os.RemoveAll(idx); err != nil {
				t.Fatal(err)
			}
			x, err := index.Open(idx, index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := x.Apply(context.Background(), memory.IndexBatch{Watermark: last}); err != nil {
				t.Fatal(err)
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
		},
		"lost documents": func(t *testing.T, idx string) {
			// Every change by its watermark, but one session's documents
			// gone: only a count tells.
			x, err := index.Open(idx, index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = x.Apply(context.Background(), memory.IndexBatch{Watermark: last,
				DeleteSessions: []memory.SessionRef{{Tenant: memory.DefaultTenant, ID: "big"}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
		},
		"behind": func(t *testing.T, idx string) {
			if err := os.RemoveAll(idx); err != nil {
				t.Fatal(err)
			}
			copyDir(t, oldIndex, idx)
		},
		"corrupt": func(t *testing.T, idx string) {
			err := filepath.WalkDir(idx, func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				return os.WriteFile(path, []byte("not an index"), 0o600)
			})
			if err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			copyDir(t, base, dir)
			damage(t, filepath.Join(dir, "index"))
			b := mustRunBinary(t, dir)
			c := b.client(t, dir)
			ready := c.mustDo(200, "GET", "/readyz", nil)
			if lag := ready["index_lag"].(float64); lag != 0 {
				t.Errorf("/readyz index_lag = %v, want 0", lag)
			}
			for word, want := range map[string]int{"okapi": 1, "narwhal": 1, "walrus": 1, "quagga": 0} {
				if got := c.search(map[string]any{"query": word, "mode": "text", "k": 5}); len(got) != want {
					t.Errorf("text search for %q = %d results, want %d", word, len(got), want)
				}
			}
			if n := len(c.search(map[string]any{"query": "herd", "mode": "text", "k": 50})); n != 50 {
				t.Errorf("text search for a word of every batch = %d results, want 50", n)
			}
			b.Stop(t)
			log := b.Log()
			for _, want := range []string{"rebuilding the full-text index from the store", "rebuilding index", "indexed=1000 of=1101", "index rebuilt"} {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %q:\n%s", want, log)
				}
			}
			if out := mustRun(t, "verify", "--data-dir", dir); !strings.Contains(out, "consistent") {
				t.Errorf("verify after the rebuild: %s", out)
			}
		})
	}
}
