package memory

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// Export writes the chosen sessions with every message to w as JSON lines.
func (a *Admin) Export(ctx context.Context, w io.Writer, o ExportOptions) (*ExportReport, error) {
	sessions, err := a.exportSessions(ctx, o)
	if err != nil {
		return nil, err
	}
	model, dim, err := a.Model(ctx)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	hdr := &ExportHeader{Format: ExportFormat, Version: ExportVersion, EmbedModel: model, EmbedDim: dim,
		Vectors: o.Vectors, ExportedAt: a.now().UTC()}
	if err := enc.Encode(ExportRecord{Type: RecordHeader, Header: hdr}); err != nil {
		return nil, fmt.Errorf("write export: %w", err)
	}
	total := 0
	for _, s := range sessions {
		total += s.Counts.Total()
	}
	p := a.progress()
	p.Begin("exporting", total)
	defer p.End()
	rep := &ExportReport{}
	for _, s := range sessions {
		if err := enc.Encode(ExportRecord{Type: RecordSession, Session: s}); err != nil {
			return nil, fmt.Errorf("write export: %w", err)
		}
		n, err := a.exportMessages(ctx, enc, s, o.Vectors)
		if err != nil {
			return nil, err
		}
		rep.Sessions++
		rep.Messages += n
		p.Add(n)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("write export: %w", err)
	}
	return rep, nil
}

func (a *Admin) exportSessions(ctx context.Context, o ExportOptions) ([]*Session, error) {
	if o.Session != "" {
		tenant := o.Tenant
		if tenant == "" {
			tenant = DefaultTenant
		}
		s, err := a.Store.Session(ctx, tenant, o.Session)
		if err != nil {
			return nil, err
		}
		return []*Session{s}, nil
	}
	if !o.All {
		return nil, Errorf(EINVALID, "name a session (--session) or export everything (--all)")
	}
	var out []*Session
	err := visitSessions(ctx, a.Store, func(s *Session) error {
		if o.Tenant == "" || s.Tenant == o.Tenant {
			out = append(out, s)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// exportMessages writes a session's messages in seq order, a page at a time.
func (a *Admin) exportMessages(ctx context.Context, enc *json.Encoder, s *Session, vectors bool) (int, error) {
	n := 0
	var after uint64
	for {
		page, err := a.Store.Messages(ctx, s.Tenant, s.ID, MessageQuery{AfterSeq: after, Limit: changeBatch})
		if err != nil {
			return n, fmt.Errorf("read messages of %s: %w", s.ID, err)
		}
		if len(page) == 0 {
			return n, nil
		}
		vecs := map[string][]float32{}
		if vectors {
			ids := make([]string, len(page))
			for i, m := range page {
				ids[i] = m.ID
			}
			withVec, err := a.Store.MessagesByID(ctx, s.Tenant, ids, true)
			if err != nil {
				return n, fmt.Errorf("read vectors of %s: %w", s.ID, err)
			}
			for _, m := range withVec {
				vecs[m.ID] = m.Vector
			}
		}
		for _, m := range page {
			if err := enc.Encode(ExportRecord{Type: RecordMessage, Message: m, Vector: vecs[m.ID]}); err != nil {
				return n, fmt.Errorf("write export: %w", err)
			}
			n++
		}
		after = page[len(page)-1].Seq
	}
}
