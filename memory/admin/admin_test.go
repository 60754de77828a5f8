package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/coldstore"
	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/index/glove"
	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/admin"
	"github.com/ctxd/ctxd/memory/boltstore"
)

// openAdmin opens a data dir's real pieces under dir.
func openAdmin(t *testing.T, dir string) (*admin.Admin, *boltstore.Store, *index.Index, *coldstore.Store) {
	t.Helper()
	st, idx, cold := memorytest.Adapters(t, dir)
	a := &admin.Admin{Store: st, Index: idx, Docs: idx, Cold: coldstore.Mirror{Store: cold},
		Embedder: func(context.Context) (memory.Embedder, error) { return glove.Default() },
		Now:      func() time.Time { return time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC) }}
	return a, st, idx, cold
}

// exportFile is an export as another ctxd would write it, without vectors:
// two tenants, one session with a summary and its cold source.
func exportFile(t *testing.T) []byte {
	t.Helper()
	at := time.Date(2024, 5, 7, 14, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.Encode(admin.ExportRecord{Type: admin.RecordHeader, Header: &admin.ExportHeader{Format: admin.ExportFormat,
		Version: admin.ExportVersion, EmbedModel: "someone-else", EmbedDim: 3, ExportedAt: at}})
	for _, tenant := range []string{"acme", "initech"} {
		enc.Encode(admin.ExportRecord{Type: admin.RecordSession, Session: &memory.Session{Tenant: tenant, ID: "s",
			ContextWindow: 4000, Encoding: memory.EncodingO200k, LastSeq: 4, CreatedAt: at, UpdatedAt: at}})
		cold := &memory.ColdInfo{DropReason: memory.ReasonSummarized, SummaryID: tenant + "-4", DroppedAt: at, RecoverableUntil: at.AddDate(0, 0, 30)}
		for i, c := range []struct {
			content string
			state   memory.State
		}{{"the zebra crossed the river", memory.StateSummarized}, {"penguins in the snow", memory.StateActive},
			{"a quiet afternoon", memory.StateActive}, {"summary: a zebra crossed", memory.StateActive}} {
			m := &memory.Message{ID: fmt.Sprintf("%s-%d", tenant, i+1), Tenant: tenant, SessionID: "s", Seq: uint64(i + 1),
				Role: memory.RoleUser, Content: c.content, Tokens: 5, State: c.state, CreatedAt: at,
				Metadata: map[string]any{"n": json.Number("12345678901234567")}}
			if c.state == memory.StateSummarized {
				m.Cold = cold
			}
			if i == 3 {
				m.Kind, m.Sources, m.Anchor = memory.KindSummary, []string{tenant + "-1"}, 1
			}
			enc.Encode(admin.ExportRecord{Type: admin.RecordMessage, Message: m})
		}
	}
	return b.Bytes()
}

func TestImportVerifyRepair(t *testing.T) {
	ctx := context.Background()
	a, st, idx, cold := openAdmin(t, t.TempDir())
	rep, err := a.Import(ctx, bytes.NewReader(exportFile(t)), admin.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	emb, _ := glove.Default()
	if rep.Sessions != 2 || rep.Messages != 8 || rep.Reembedded != 8 || rep.Model != emb.Model() {
		t.Fatalf("import report = %+v", rep)
	}
	m, _ := st.MessagesByID(ctx, "acme", []string{"acme-1"}, true)
	if len(m) != 1 || len(m[0].Vector) != emb.Dim() || m[0].Metadata["n"] != 12345678901234567.0 {
		t.Fatalf("imported message = %+v", m)
	}
	if chunks, err := cold.Read("initech", "s"); err != nil || len(chunks) != 1 || chunks[0].ChunkID != "initech-1" {
		t.Fatalf("cold mirror of an imported session = %+v, %v", chunks, err)
	}
	v, err := a.Verify(ctx)
	if err != nil || !v.Consistent() || v.Messages != 8 || v.IndexDocs != 8 || v.ColdFiles != 2 {
		t.Fatalf("verify after import = %+v, %v", v, err)
	}
	// Importing again is refused before anything is written.
	if _, err := a.Import(ctx, bytes.NewReader(exportFile(t)), admin.ImportOptions{}); memory.ErrorCode(err) != memory.ECONFLICT {
		t.Fatalf("second import: %v", err)
	}

	// Damage everything verify looks at: a session written behind the
	// index's back with one message lacking a vector and one of the wrong
	// length, a stray document, a stale and an orphan cold file.
	at := time.Date(2024, 5, 8, 0, 0, 0, 0, time.UTC)
	_, err = st.Import(ctx, &memory.Session{Tenant: "acme", ID: "late", ContextWindow: 4000, Encoding: memory.EncodingO200k},
		[]*memory.Message{
			{ID: "late-1", Tenant: "acme", SessionID: "late", Seq: 1, Role: memory.RoleUser, Content: "okapi", State: memory.StateActive, CreatedAt: at},
			{ID: "late-2", Tenant: "acme", SessionID: "late", Seq: 2, Role: memory.RoleUser, Content: "ibex", State: memory.StateActive, CreatedAt: at, Vector: []float32{1, 0, 0}},
		})
	if err != nil {
		t.Fatal(err)
	}
	last, _ := idx.Watermark()
	stray := &memory.Message{ID: "stray", Tenant: "acme", SessionID: "s", Role: memory.RoleUser, Content: "x", State: memory.StateActive}
	if err := idx.Apply(ctx, memory.IndexBatch{Upserts: []*memory.Message{stray}, Watermark: last}); err != nil {
		t.Fatal(err)
	}
	if err := cold.Rewrite("acme", "s", []coldstore.Chunk{{ChunkID: "acme-1", Content: "edited by hand"}}); err != nil {
		t.Fatal(err)
	}
	if err := cold.Rewrite("acme", "gone", []coldstore.Chunk{{ChunkID: "g-1"}}); err != nil {
		t.Fatal(err)
	}
	// Counts that say nothing is cold (the window builder would stop
	// looking there), and one too many active.
	if _, err := st.Update(ctx, "initech", "s", func(tx memory.SessionTx) error {
		tx.Session().Counts = memory.Counts{Active: 4}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v, err = a.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counts := v.Counts()
	want := map[string]int{admin.FindVectorMissing: 1, admin.FindVectorDim: 1, admin.FindIndexBehind: 1,
		admin.FindIndexExtra: 1, memory.FindColdStale: 1, admin.FindColdOrphan: 1, admin.FindSessionCounts: 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("findings = %v, want %v:\n%s", counts, want, findings(v))
	}

	if err := a.Repair(ctx, v); err != nil {
		t.Fatal(err)
	}
	if v, err = a.Verify(ctx); err != nil || !v.Consistent() {
		t.Fatalf("verify after repair: %v\n%s", err, findings(v))
	}
	if sess, err := st.Session(ctx, "initech", "s"); err != nil || sess.Counts != (memory.Counts{Active: 3, Summarized: 1}) {
		t.Fatalf("initech/s after repair: %+v, %v", sess, err)
	}
	hits, err := idx.Search(ctx, memory.SearchQuery{Tenant: "acme", Text: "okapi", Mode: memory.ModeText, K: 5})
	if err != nil || len(hits) != 1 || hits[0].ID != "late-1" {
		t.Fatalf("search after repair = %+v, %v", hits, err)
	}
	if files, _ := cold.Sessions(); len(files) != 2 {
		t.Fatalf("cold files after repair = %v", files)
	}
}

func TestExportIsWhatImportReads(t *testing.T) {
	ctx := context.Background()
	a, _, _, _ := openAdmin(t, t.TempDir())
	if _, err := a.Import(ctx, bytes.NewReader(exportFile(t)), admin.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	var all, one bytes.Buffer
	if rep, err := a.Export(ctx, &all, admin.ExportOptions{All: true, Vectors: true}); err != nil || rep.Sessions != 2 || rep.Messages != 8 {
		t.Fatalf("export --all = %+v, %v", rep, err)
	}
	if _, err := a.Export(ctx, &one, admin.ExportOptions{Tenant: "initech", Session: "s"}); err != nil {
		t.Fatal(err)
	}
	// Header, session, four messages, trailer.
	if n := strings.Count(one.String(), "\n"); n != 7 || strings.Contains(one.String(), "acme") || strings.Contains(one.String(), `"vector"`) {
		t.Fatalf("export of one session without vectors:\n%s", one.String())
	}
	b, _, _, _ := openAdmin(t, t.TempDir())
	rep, err := b.Import(ctx, bytes.NewReader(all.Bytes()), admin.ImportOptions{})
	if err != nil || rep.Reembedded != 0 {
		t.Fatalf("import of an export with this model's vectors: %+v, %v", rep, err)
	}
	var again bytes.Buffer
	if _, err := b.Export(ctx, &again, admin.ExportOptions{All: true, Vectors: true}); err != nil {
		t.Fatal(err)
	}
	if again.String() != all.String() {
		t.Fatalf("export -> import -> export changed the data:\n%s\n---\n%s", all.String(), again.String())
	}
	if _, err := a.Export(ctx, &again, admin.ExportOptions{}); memory.ErrorCode(err) != memory.EINVALID {
		t.Fatalf("export without --session or --all: %v", err)
	}
}

func findings(v *admin.VerifyReport) string {
	if v == nil {
		return ""
	}
	var b strings.Builder
	for _, f := range v.Findings {
		fmt.Fprintln(&b, f)
	}
	return b.String()
}
