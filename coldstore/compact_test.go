package coldstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// Chunks that go cold again and again (recovered, dropped again) do not
// pile up: the file stays within ~2.1 times its current lines, each id's
// last line is the one Read and verify see, every line stays whole JSON
// with its content, and a line that does not parse is kept for verify.
func TestAppendCompactsSupersededLines(t *testing.T) {
	s := openStore(t)
	m := Mirror{s}
	rng := rand.New(rand.NewPCG(1, 2))
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	content := map[string]string{}
	dropped := map[string]time.Time{}
	msg := func(id string, n int) *memory.Message {
		if content[id] == "" {
			content[id] = strings.Repeat(fmt.Sprintf("output of %s, line %d\n", id, rng.IntN(1000)), 20+rng.IntN(80))
		}
		dropped[id] = at.Add(time.Duration(n) * time.Second)
		return &memory.Message{ID: id, SessionID: "s", Role: memory.RoleTool, Content: content[id], CreatedAt: at,
			Cold: &memory.ColdInfo{DropReason: memory.ReasonBudget, DroppedAt: dropped[id], RecoverableUntil: at.Add(time.Hour)}}
	}
	if err := m.Append("t", "s", []*memory.Message{msg("m0", 0)}); err != nil {
		t.Fatal(err)
	}
	_, path, _ := s.paths("t", "s")
	appendSegment(t, path, "not json, typed by hand\n")
	lineBytes := map[string]int{} // each id's current line
	for n := 1; n <= 400; n++ {
		// New chunks now and then; mostly the first 20 going cold again.
		id := fmt.Sprintf("m%d", rng.IntN(20))
		if n%10 == 0 {
			id = fmt.Sprintf("new%d", n)
		}
		if err := m.Append("t", "s", []*memory.Message{msg(id, n)}); err != nil {
			t.Fatal(err)
		}
		text := plainText(t, path)
		b, _ := json.Marshal(ChunkOf(msg(id, n)))
		lineBytes[id] = len(b) + 1
		live := 0
		for _, n := range lineBytes {
			live += n
		}
		if len(text) > 64<<10 && float64(len(text)) > 2.2*float64(live) {
			t.Fatalf("after %d appends the file holds %d bytes of text for %d of current lines", n, len(text), live)
		}
	}
	got, err := s.Read("t", "s")
	var dmg *DamageError
	if !errors.As(err, &dmg) || len(dmg.BadLines) != 1 {
		t.Fatalf("Read: %v; want the hand-typed line reported", err)
	}
	last := map[string]Chunk{}
	for _, c := range got {
		last[c.ChunkID] = c
	}
	if len(last) != len(content) {
		t.Fatalf("file has %d chunk ids, want %d", len(last), len(content))
	}
	for id, c := range last {
		if c.Content != content[id] || !c.DroppedAt.Equal(dropped[id]) {
			t.Fatalf("%s: last line dropped at %v, want %v (or content differs)", id, c.DroppedAt, dropped[id])
		}
	}
	if len(got) == len(last) {
		t.Log("no superseded line left at all") // allowed: compaction just ran
	}
	if !bytes.Contains(plainText(t, path), []byte("not json, typed by hand\n")) {
		t.Fatal("compaction dropped a line it could not read")
	}
	// Segments are merged as the file grows: 401 appends leave a handful.
	raw, _ := os.ReadFile(path)
	sc := scanSegments(raw)
	t.Logf("%d segments, %d bytes for %d of text", len(sc.segs), len(raw), len(plainText(t, path)))
	if len(sc.segs) > 50 {
		t.Fatalf("401 appends left %d segments", len(sc.segs))
	}
}

// currentLines keeps each id's last line in file order.
func TestCurrentLines(t *testing.T) {
	in := `{"chunk_id":"a","n":1}
{"chunk_id":"b","n":1}
junk
{"chunk_id":"a","n":2}
`
	kept, dropped := currentLines([]byte(in))
	want := "{\"chunk_id\":\"b\",\"n\":1}\njunk\n{\"chunk_id\":\"a\",\"n\":2}\n"
	if string(kept) != want || dropped != len("{\"chunk_id\":\"a\",\"n\":1}\n") {
		t.Fatalf("kept %q, dropped %d", kept, dropped)
	}
}

// A line quotes the start of a long prompt; verify matches lines written
// whole before, and lines written clipped, against the store.
func TestLinePromptClipped(t *testing.T) {
	long := strings.Repeat("é", 1000) // 2,000 bytes
	msg := &memory.Message{ID: "m1", Tenant: "t", SessionID: "s", Content: "c",
		Cold: &memory.ColdInfo{DropReason: memory.ReasonBudget, PromptAtDrop: long}}
	c := ChunkOf(msg)
	if len(c.PromptAtDrop) > maxLinePrompt+20 || !strings.HasSuffix(c.PromptAtDrop, "… (2000 bytes)") {
		t.Fatalf("line prompt = %q", c.PromptAtDrop)
	}
	fromStore, err := Mirror{}.Fingerprint(msg)
	if err != nil {
		t.Fatal(err)
	}
	whole := c
	whole.PromptAtDrop = long // as lines were written before
	for _, line := range []Chunk{c, whole} {
		if fp, err := fingerprint(line); err != nil || fp != fromStore {
			t.Fatalf("fingerprint of a line with a %d-byte prompt differs from the store's: %v", len(line.PromptAtDrop), err)
		}
	}
	// A line tells how its message first went cold; dropped again (another
	// prompt, reason, score) or released by a rolled summary, it still
	// agrees with the store. Its content and retention must.
	redropped := c
	redropped.PromptAtDrop, redropped.DropReason, redropped.RelevanceScore, redropped.SummaryID = "another prompt", memory.ReasonSummaryRolled, 0.7, "sum1"
	if fp, _ := fingerprint(redropped); fp != fromStore {
		t.Fatal("a line of the first drop differs from the store's after another drop")
	}
	edited := c
	edited.Content = "c, edited"
	retention := c
	retention.RecoverableUntil = time.Unix(1, 0)
	for _, line := range []Chunk{edited, retention} {
		if fp, _ := fingerprint(line); fp == fromStore {
			t.Fatalf("a line with other content or retention matches: %+v", line)
		}
	}
}
