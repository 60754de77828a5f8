package metrics_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func writeFile(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDirBytes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.jsonl"), 100)
	writeFile(t, filepath.Join(dir, "t1", "s1.jsonl"), 250)
	writeFile(t, filepath.Join(dir, "t1", "deep", "s2.jsonl"), 7)
	if n, err := metrics.DirBytes(dir, 0)(); err != nil || n != 357 {
		t.Errorf("DirBytes = %d, %v; want 357", n, err)
	}
	// dir, a.jsonl, t1, deep, s2, s1: six entries.
	if _, err := metrics.DirBytes(dir, 5)(); err == nil || !strings.Contains(err.Error(), "more than 5") {
		t.Errorf("over the bound: err = %v, want a refusal", err)
	}
	if n, err := metrics.DirBytes(dir, 6)(); err != nil || n != 357 {
		t.Errorf("at the bound: %d, %v", n, err)
	}
	if n, err := metrics.DirBytes(filepath.Join(dir, "missing"), 0)(); err != nil || n != 0 {
		t.Errorf("missing dir: %d, %v; want 0", n, err)
	}
	if n, err := metrics.FileBytes(filepath.Join(dir, "t1", "s1.jsonl"))(); err != nil || n != 250 {
		t.Errorf("FileBytes = %d, %v", n, err)
	}
}

func TestSizesAreReadAtScrape(t *testing.T) {
	dir := t.TempDir()
	m := metrics.New(slog.New(slog.DiscardHandler)) // the broken size is logged
	m.WatchSizes(metrics.Sizes{
		StoreBytes:    metrics.FileBytes(filepath.Join(dir, "ctxd.db")),
		ColdBytes:     metrics.DirBytes(filepath.Join(dir, "cold"), 0),
		IndexCounts:   func() (uint64, uint64, error) { return 12, 10, nil },
		EventLogBytes: func() (int64, error) { return 0, errors.New("disk on fire") },
	})
	writeFile(t, filepath.Join(dir, "ctxd.db"), 4096)
	writeFile(t, filepath.Join(dir, "cold", "t", "s.jsonl"), 300)
	want := `
# HELP ctxd_store_size_bytes Size of the store file (ctxd.db).
# TYPE ctxd_store_size_bytes gauge
ctxd_store_size_bytes 4096
# HELP ctxd_cold_storage_size_bytes Size of the cold-storage mirror (cold/).
# TYPE ctxd_cold_storage_size_bytes gauge
ctxd_cold_storage_size_bytes 300
# HELP ctxd_index_documents Messages in the full-text index.
# TYPE ctxd_index_documents gauge
ctxd_index_documents 12
# HELP ctxd_index_vectors Vectors in the vector index.
# TYPE ctxd_index_vectors gauge
ctxd_index_vectors 10
`
	names := []string{"ctxd_store_size_bytes", "ctxd_cold_storage_size_bytes", "ctxd_index_documents", "ctxd_index_vectors"}
	// Gather reports the broken size as an error alongside the rest.
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err == nil ||
		!strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("gather: %v, want the event log's error", err)
	}
	// The handler serves what it could read rather than failing the scrape.
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	body := scrape(t, srv.URL)
	for _, line := range []string{"ctxd_store_size_bytes 4096", "ctxd_cold_storage_size_bytes 300", "ctxd_index_vectors 10"} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if strings.Contains(body, "ctxd_event_log_size_bytes") {
		t.Error("an unreadable size was reported")
	}
	// Sizes are read again at each scrape.
	writeFile(t, filepath.Join(dir, "cold", "t", "s2.jsonl"), 50)
	if body := scrape(t, srv.URL); !strings.Contains(body, "ctxd_cold_storage_size_bytes 350\n") {
		t.Error("the cold size was not read again")
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("scrape = %d: %s", res.StatusCode, body)
	}
	return string(body)
}
