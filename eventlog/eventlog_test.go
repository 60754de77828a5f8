package eventlog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func fixedClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600))
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func open(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedClock()
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// plainText is a stream file's text, a rotated one decompressed.
func plainText(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if b, err = io.ReadAll(z); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return b
}

// readLines reads a stream's file, a rotated one through the standard
// library's gzip (as zcat would).
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		if r, err = gzip.NewReader(f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var out []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: line %d is not whole JSON: %v: %q", path, len(out)+1, err, sc.Text())
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLogAddsTimeAndKeepsCallerMap(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.FixedZone("CEST", 2*3600))
	l := open(t, dir, Options{Now: func() time.Time { return now }})
	ev := map[string]any{"session_id": "s1", "time": "caller", "note": "a<b & c\nd"}
	if err := l.Log(StreamCompaction, ev); err != nil {
		t.Fatal(err)
	}
	if ev["time"] != "caller" {
		t.Fatalf("caller map modified: %v", ev)
	}
	lines := readLines(t, filepath.Join(dir, "compaction.jsonl"))
	if len(lines) != 1 {
		t.Fatalf("got %d lines", len(lines))
	}
	if got, want := lines[0]["time"], "2025-06-01T10:00:00.123456789Z"; got != want {
		t.Fatalf("time = %v, want %v", got, want)
	}
	if lines[0]["note"] != "a<b & c\nd" {
		t.Fatalf("note = %q", lines[0]["note"])
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "compaction.jsonl"))
	if !strings.Contains(string(raw), "a<b & c") {
		t.Fatalf("HTML-escaped: %s", raw)
	}
}

func TestConcurrentWritersWholeLines(t *testing.T) {
	dir := t.TempDir()
	// Small files so rotation races with writers too.
	l := open(t, dir, Options{MaxBytes: 64 << 10, MaxFiles: 50})
	const writers, each = 16, 200
	pad := strings.Repeat("x", 300)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := l.Log(StreamDrops, map[string]any{"w": w, "i": i, "pad": pad}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// Readers alongside writers: Tail must never see a torn line either.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if _, err := l.Tail(StreamDrops, 50, nil); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()

	seen := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "drops*.jsonl*"))
	for _, p := range files {
		for _, e := range readLines(t, p) {
			key := fmt.Sprint(e["w"], "/", e["i"])
			if seen[key] {
				t.Fatalf("duplicate event %s", key)
			}
			seen[key] = true
		}
	}
	if len(seen) != writers*each {
		t.Fatalf("got %d events, want %d", len(seen), writers*each)
	}
	all, err := l.Tail(StreamDrops, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != writers*each {
		t.Fatalf("Tail(all) = %d events, want %d", len(all), writers*each)
	}
	// Per writer, events must come back in the order they were written.
	last := map[string]int64{}
	for _, e := range all {
		w := e["w"].(json.Number).String()
		i, _ := e["i"].(json.Number).Int64()
		if prev, ok := last[w]; ok && i != prev+1 {
			t.Fatalf("writer %s: event %d after %d", w, i, prev)
		}
		last[w] = i
	}
}

func TestRotationKeepsMaxFilesAndTailSpansThem(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{MaxBytes: 200, MaxFiles: 3})
	const total = 100
	for i := range total {
		if err := l.Log(StreamRecoveries, map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "recoveries*"))
	want := []string{"recoveries.1.jsonl.gz", "recoveries.2.jsonl.gz", "recoveries.3.jsonl.gz", "recoveries.jsonl"}
	for i := range files {
		files[i] = filepath.Base(files[i])
	}
	if fmt.Sprint(files) != fmt.Sprint(want) { // current + 3 rotated, compressed
		t.Fatalf("files = %v, want %v", files, want)
	}
	var kept int
	for _, p := range files {
		if text := plainText(t, filepath.Join(dir, p)); len(text) > 200 {
			t.Fatalf("%s holds %d bytes, over MaxBytes", p, len(text))
		}
		kept += len(readLines(t, filepath.Join(dir, p)))
	}

	all, err := l.Tail(StreamRecoveries, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != kept {
		t.Fatalf("Tail(all) = %d, files hold %d", len(all), kept)
	}
	// Oldest kept through newest written, consecutive, newest last.
	first, _ := all[0]["i"].(json.Number).Int64()
	for k, e := range all {
		if got, _ := e["i"].(json.Number).Int64(); got != first+int64(k) {
			t.Fatalf("Tail[%d].i = %d, want %d", k, got, first+int64(k))
		}
	}
	if first+int64(len(all)) != total {
		t.Fatalf("Tail ends at %d, want %d", first+int64(len(all))-1, total-1)
	}

	// n smaller than the current file, and spanning into rotated files.
	for _, n := range []int{1, 2, kept - 1} {
		got, err := l.Tail(StreamRecoveries, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("Tail(%d) = %d events", n, len(got))
		}
		for k, e := range got {
			want := int64(total - n + k)
			if i, _ := e["i"].(json.Number).Int64(); i != want {
				t.Fatalf("Tail(%d)[%d].i = %d, want %d", n, k, i, want)
			}
		}
	}
}

func TestOversizedEventStillWritten(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{MaxBytes: 50, MaxFiles: 2})
	big := strings.Repeat("y", 500)
	for i := range 3 {
		if err := l.Log(StreamPurges, map[string]any{"i": i, "big": big}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.Tail(StreamPurges, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d events, want 3 (one per file)", len(got))
	}
}

func TestBadStreamNames(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	for _, name := range []string{"", "nope", "../compaction", "compaction/../../x", "/etc/passwd", "compaction.1", "Compaction", "drops\x00"} {
		if err := l.Log(name, map[string]any{"a": 1}); err == nil {
			t.Errorf("Log(%q) accepted", name)
		}
		if _, err := l.Tail(name, 1, nil); err == nil {
			t.Errorf("Tail(%q) accepted", name)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(Streams) {
		t.Fatalf("dir holds %d entries, want the %d streams", len(entries), len(Streams))
	}
}

func TestTailFilter(t *testing.T) {
	l := open(t, t.TempDir(), Options{MaxBytes: 300, MaxFiles: 10})
	for i := range 40 {
		s := "A"
		if i%3 == 0 {
			s = "B"
		}
		if err := l.Log(StreamCompaction, map[string]any{"session_id": s, "i": i}); err != nil {
			t.Fatal(err)
		}
	}
	onlyB := func(e map[string]any) bool { return e["session_id"] == "B" }
	got, err := l.Tail(StreamCompaction, 5, onlyB)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{27, 30, 33, 36, 39}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for k, e := range got {
		if i, _ := e["i"].(json.Number).Int64(); i != want[k] || e["session_id"] != "B" {
			t.Fatalf("got[%d] = %v, want i=%d session B", k, e, want[k])
		}
	}
	none, err := l.Tail(StreamCompaction, 5, func(map[string]any) bool { return false })
	if err != nil || len(none) != 0 {
		t.Fatalf("Tail(no match) = %v, %v", none, err)
	}
	empty, err := l.Tail(StreamContextHealth, 5, nil)
	if err != nil || len(empty) != 0 {
		t.Fatalf("Tail(empty stream) = %v, %v", empty, err)
	}
}

func TestReopenAppendsAndTailSkipsTornLine(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	for i := range 3 {
		if err := l.Log(StreamDrops, map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Log(StreamDrops, map[string]any{"i": 99}); err != ErrClosed {
		t.Fatalf("Log after Close = %v, want ErrClosed", err)
	}
	// A crash mid-write leaves a line without its end.
	p := filepath.Join(dir, "drops.jsonl")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"i":3,"tor`)
	f.Close()

	l2 := open(t, dir, Options{Sync: true})
	if err := l2.Log(StreamDrops, map[string]any{"i": 4}); err != nil {
		t.Fatal(err)
	}
	got, err := l2.Tail(StreamDrops, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The torn text is lost, and nothing else.
	var is []string
	for _, e := range got {
		is = append(is, e["i"].(json.Number).String())
	}
	if strings.Join(is, ",") != "0,1,2,4" {
		t.Fatalf("events = %v, want 0,1,2,4", is)
	}
	if err := l2.Log(StreamDrops, map[string]any{"i": 5}); err != nil {
		t.Fatal(err)
	}
	got, _ = l2.Tail(StreamDrops, 1, nil)
	if len(got) != 1 || got[0]["i"].(json.Number).String() != "5" {
		t.Fatalf("last = %v", got)
	}
}

func TestScanBackwardLongLines(t *testing.T) {
	var b strings.Builder
	var want []string
	for i := range 5 {
		line := fmt.Sprintf("%d:%s", i, strings.Repeat("z", i*70000))
		want = append(want, line)
		b.WriteString(line + "\n\n")
	}
	b.WriteString("tail-without-newline")
	want = append(want, "tail-without-newline")
	s := b.String()
	var got []string
	if err := scanBackward(strings.NewReader(s), int64(len(s)), func(l []byte) bool {
		got = append(got, string(l))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d", len(got), len(want))
	}
	for k := range want {
		if got[len(got)-1-k] != want[k] {
			t.Fatalf("line %d differs", k)
		}
	}
}

// A long string field (a recovery event's prompt) is cut to MaxString bytes
// of whole characters and says how long it was; other fields, and the
// caller's map, are left as they are. MaxString < 0 keeps it whole.
func TestLongStringsAreCut(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{MaxString: 10})
	prompt := "ééééé" + strings.Repeat("x", 90) // 10 bytes of é, then 90
	ev := map[string]any{"prompt": prompt, "chunk": "m1", "tokens": 5}
	if err := l.Log(StreamRecoveries, ev); err != nil {
		t.Fatal(err)
	}
	if ev["prompt"] != prompt {
		t.Fatal("Log changed the caller's map")
	}
	whole := open(t, t.TempDir(), Options{MaxString: -1})
	if err := whole.Log(StreamRecoveries, ev); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, filepath.Join(dir, StreamRecoveries+".jsonl"))[0]
	if got["prompt"] != "ééééé… (100 bytes)" || got["chunk"] != ev["chunk"] || got["tokens"] != 5.0 {
		t.Fatalf("logged %v", got)
	}
	if got := readLines(t, filepath.Join(whole.dir, StreamRecoveries+".jsonl"))[0]; got["prompt"] != prompt {
		t.Fatalf("MaxString -1 logged prompt %q", got["prompt"])
	}
}
