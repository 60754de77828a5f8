package coldstore

import (
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

func TestChunkOf(t *testing.T) {
	created := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	dropped := created.Add(time.Hour)
	m := &memory.Message{
		ID: "m1", Tenant: "acme", SessionID: "s:1", Role: memory.RoleTool, Name: "grep",
		Content: "result", Tokens: 7, CreatedAt: created, Metadata: map[string]any{"k": "v"},
		Cold: &memory.ColdInfo{
			DropReason: memory.ReasonSummarized, RelevanceScore: 0.12, Threshold: 0.3,
			PromptAtDrop: "fix the bug", DroppedAt: dropped, RecoverableUntil: dropped.Add(24 * time.Hour),
			SummaryID: "sum1",
		},
	}
	c := ChunkOf(m)
	want := Chunk{
		ChunkID: "m1", SessionID: "s:1", Tenant: "acme", Timestamp: created, Content: "result",
		Tokens: 7, Role: memory.RoleTool, Name: "grep", DropReason: memory.ReasonSummarized,
		RelevanceScore: 0.12, Threshold: 0.3, PromptAtDrop: "fix the bug",
		RecoverableUntil: dropped.Add(24 * time.Hour), DroppedAt: dropped, SummaryID: "sum1",
		Metadata: map[string]any{"k": "v"},
	}
	if !equalChunk(c, want) {
		t.Fatalf("ChunkOf =\n%+v\nwant\n%+v", c, want)
	}
	m.Metadata["k"] = "changed"
	if c.Metadata["k"] != "v" {
		t.Fatal("chunk shares its metadata map with the message")
	}

	m.Cold = nil
	if c := ChunkOf(m); c.DropReason != "" || !c.RecoverableUntil.IsZero() || c.ChunkID != "m1" {
		t.Fatalf("ChunkOf(no cold info) = %+v", c)
	}
}

func TestExpiredAndPurge(t *testing.T) {
	now := time.Date(2025, 5, 5, 12, 0, 0, 0, time.UTC)
	chunks := []Chunk{
		{ChunkID: "past", RecoverableUntil: now.Add(-time.Nanosecond)},
		{ChunkID: "exactly-now", RecoverableUntil: now},
		{ChunkID: "future", RecoverableUntil: now.Add(time.Hour)},
		{ChunkID: "no-deadline"},
		{ChunkID: "long-ago", RecoverableUntil: now.AddDate(-1, 0, 0)},
		// Another zone, same instant as now + 1s: still recoverable.
		{ChunkID: "zoned", RecoverableUntil: now.Add(time.Second).In(time.FixedZone("X", -5*3600))},
	}
	keep, purged := Purge(chunks, now)
	ids := func(cs []Chunk) (out []string) {
		for _, c := range cs {
			out = append(out, c.ChunkID)
		}
		return out
	}
	if got, want := ids(keep), []string{"exactly-now", "future", "no-deadline", "zoned"}; !equalStrings(got, want) {
		t.Fatalf("keep = %v, want %v", got, want)
	}
	if got, want := ids(purged), []string{"past", "long-ago"}; !equalStrings(got, want) {
		t.Fatalf("purged = %v, want %v", got, want)
	}
	if chunks[0].ChunkID != "past" || len(chunks) != 6 {
		t.Fatal("Purge changed its argument")
	}
	// Time moves on: what was kept expires.
	_, purged = Purge(keep, now.Add(2*time.Hour))
	if got, want := ids(purged), []string{"exactly-now", "future", "zoned"}; !equalStrings(got, want) {
		t.Fatalf("later purged = %v, want %v", got, want)
	}
	if k, p := Purge(nil, now); k != nil || p != nil {
		t.Fatalf("Purge(nil) = %v, %v", k, p)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
