package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// ExportOptions choose what to export.
type ExportOptions struct {
	// Tenant limits the export to one tenant; "" with All means every tenant.
	Tenant string
	// Session exports one session of Tenant (DefaultTenant when empty).
	Session string
	All     bool
	Vectors bool
}

// ExportReport counts what was written.
type ExportReport struct {
	Sessions int `json:"sessions"`
	Messages int `json:"messages"`
}

// exportBuffer is how much of an export is gathered before it goes to the
// writer: large enough that encoding is not slowed by small writes, small
// enough that a streamed export reaches its client steadily.
const exportBuffer = 64 << 10

// Export writes the chosen sessions with every message to w as JSON lines,
// from one snapshot of the store.
func (a *Admin) Export(ctx context.Context, w io.Writer, o ExportOptions) (*ExportReport, error) {
	return exportStore(ctx, a.Store, w, o, a.now(), a.progress())
}

// ExportLive streams the chosen sessions of a serving store to w, in the
// format of Admin.Export (GET /v1/export). It reads one snapshot, so a
// write that commits during the export is in it entirely or not at all,
// and writers are not held up. The caller decides which tenants o may
// name. Errors: EINVALID (neither a session nor All), ENOTFOUND (no such
// session), and those of w.
func ExportLive(ctx context.Context, s *memory.Service, w io.Writer, o ExportOptions) (*ExportReport, error) {
	return exportStore(ctx, s.Store, w, o, s.Now(), noProgress{})
}

// exportStore writes an export of st from one snapshot. Once the header is
// out, a failure still ends the export in a trailer, marked incomplete, so
// a reader of a stream that answered 200 long ago learns it is short.
func exportStore(ctx context.Context, st memory.Store, w io.Writer, o ExportOptions, now time.Time, p memory.Progress) (*ExportReport, error) {
	if o.Session == "" && !o.All {
		return nil, memory.Errorf(memory.EINVALID, "name a session (--session) or export everything (--all)")
	}
	bw := bufio.NewWriterSize(w, exportBuffer)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	rep := &ExportReport{}
	started := false
	err := st.View(ctx, func(snap memory.Snapshot) error {
		sessions, err := exportSessions(snap, o)
		if err != nil {
			return err
		}
		model, dim, err := readModel(snap.Meta)
		if err != nil {
			return err
		}
		started = true
		hdr := &ExportHeader{Format: ExportFormat, Version: ExportVersion, EmbedModel: model, EmbedDim: dim,
			Vectors: o.Vectors, ExportedAt: now.UTC(), Trailer: true}
		if err := enc.Encode(ExportRecord{Type: RecordHeader, Header: hdr}); err != nil {
			return fmt.Errorf("write export: %w", err)
		}
		total := 0
		for _, s := range sessions {
			total += s.Counts.Total()
		}
		p.Begin("exporting", total)
		defer p.End()
		for _, s := range sessions {
			if err := enc.Encode(ExportRecord{Type: RecordSession, Session: s}); err != nil {
				return fmt.Errorf("write export: %w", err)
			}
			rep.Sessions++
			n, err := exportMessages(snap, enc, s, o.Vectors)
			rep.Messages += n
			if err != nil {
				return err
			}
			p.Add(n)
		}
		return nil
	})
	if !started {
		return nil, err
	}
	t := &ExportTrailer{Complete: err == nil, Sessions: rep.Sessions, Messages: rep.Messages}
	if err != nil {
		t.Error = err.Error()
	}
	// After a failed write this fails too; the reader then finds no
	// trailer, which says the same.
	terr := enc.Encode(ExportRecord{Type: RecordTrailer, Trailer: t})
	if terr == nil {
		terr = bw.Flush()
	}
	if err != nil {
		return rep, err
	}
	if terr != nil {
		return rep, fmt.Errorf("write export: %w", terr)
	}
	return rep, nil
}

func exportSessions(snap memory.Snapshot, o ExportOptions) ([]*memory.Session, error) {
	if o.Session != "" {
		tenant := o.Tenant
		if tenant == "" {
			tenant = memory.DefaultTenant
		}
		s, err := snap.Session(tenant, o.Session)
		if err != nil {
			return nil, err
		}
		return []*memory.Session{s}, nil
	}
	var out []*memory.Session
	err := snap.ForEachSession(o.Tenant, func(s *memory.Session) error {
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// exportMessages writes a session's messages in seq order, a page at a
// time, so a large session is never held in memory whole.
func exportMessages(snap memory.Snapshot, enc *json.Encoder, s *memory.Session, vectors bool) (int, error) {
	n := 0
	var after uint64
	for {
		page, err := snap.Messages(s.Tenant, s.ID, memory.MessageQuery{AfterSeq: after, Limit: memory.ChangeBatch, Vectors: vectors})
		if err != nil {
			return n, fmt.Errorf("read messages of %s: %w", s.ID, err)
		}
		if len(page) == 0 {
			return n, nil
		}
		for _, m := range page {
			if err := enc.Encode(ExportRecord{Type: RecordMessage, Message: m, Vector: m.Vector}); err != nil {
				return n, fmt.Errorf("write export: %w", err)
			}
			n++
		}
		after = page[len(page)-1].Seq
	}
}
