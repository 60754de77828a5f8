package admin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// ImportOptions tune an import.
type ImportOptions struct {
	// Replace deletes a session that exists already before importing it;
	// without it such a session stops the import before anything is written.
	Replace bool
}

// ImportReport counts what was imported.
type ImportReport struct {
	Sessions   int    `json:"sessions"`
	Messages   int    `json:"messages"`
	Reembedded int    `json:"reembedded"`
	Replaced   int    `json:"replaced"`
	Model      string `json:"embed_model"`
}

// maxExportLine bounds one line of an export: a message of 1 MiB of content
// with escapes, metadata and a large vector fits.
const maxExportLine = 64 << 20

// Import restores an export into the store. The file is read twice: first
// to refuse sessions that exist (before anything is written), then to
// write each session with its messages in one transaction. Exported vectors
// are kept when they come from the data dir's model, otherwise messages are
// embedded again. The index then catches up through the change log and the
// cold mirror is written for the sessions' cold messages.
//
// An import that does not finish (killed, SIGTERM, a disk error) leaves a
// mark in the store (ImportMetaKey): the server refuses to start on a
// partial restore, and the same export imported again finishes it, the
// sessions it wrote replaced without --replace.
func (a *Admin) Import(ctx context.Context, r io.ReadSeeker, o ImportOptions) (*ImportReport, error) {
	sum := sha256.New()
	hdr, existing, total, err := a.importPlan(ctx, io.TeeReader(r, sum))
	if err != nil {
		return nil, err
	}
	mark := importMark{Export: hex.EncodeToString(sum.Sum(nil)), Started: time.Now().UTC()}
	prev, err := interruptedImport(ctx, a.Store)
	if err != nil {
		return nil, err
	}
	resume := prev != nil && prev.Export == mark.Export
	if len(existing) > 0 && !o.Replace && !resume {
		msg := ""
		if prev != nil {
			msg = fmt.Sprintf(" (an import of another export, sha256 %s, was interrupted here on %s: import that file again to finish it)", prev.Export, prev.Started.Format(time.RFC3339))
		}
		return nil, memory.Errorf(memory.ECONFLICT, "%d session(s) of the export exist in this data dir already (first: %q of tenant %q): nothing was imported; use --replace to overwrite them%s",
			len(existing), existing[0].ID, existing[0].Tenant, msg)
	}
	useVectors, err := a.importModel(ctx, hdr)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(mark)
	if err := a.Store.SetMeta(ctx, ImportMetaKey, string(b)); err != nil {
		return nil, fmt.Errorf("mark the import as started: %w", err)
	}
	rep := &ImportReport{Replaced: len(existing)}
	for _, s := range existing {
		if err := a.Store.DeleteSession(ctx, s.Tenant, s.ID); err != nil {
			return nil, fmt.Errorf("replace session %s: %w", s.ID, err)
		}
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewind export: %w", err)
	}
	var cold []memory.SessionRef
	p := a.progress()
	p.Begin("importing", total)
	err = readExport(r, func(s *memory.Session, msgs []*memory.Message) error {
		n, err := a.importSession(ctx, s, msgs, useVectors)
		if err != nil {
			return err
		}
		rep.Sessions++
		rep.Messages += len(msgs)
		rep.Reembedded += n
		for _, m := range msgs {
			if !m.InWindow() {
				cold = append(cold, memory.SessionRef{Tenant: s.Tenant, ID: s.ID})
				break
			}
		}
		return nil
	})
	p.End()
	if err != nil {
		return rep, err
	}
	if rep.Model, _, err = a.Model(ctx); err != nil {
		return rep, err
	}
	if a.Index != nil {
		if err := a.CatchUp(ctx); err != nil {
			return rep, fmt.Errorf("index imported messages: %w", err)
		}
	}
	if err := a.importCold(ctx, existing, cold); err != nil {
		return rep, err
	}
	if err := a.Store.SetMeta(ctx, ImportMetaKey, ""); err != nil {
		return rep, fmt.Errorf("mark the import as finished: %w", err)
	}
	return rep, nil
}

// ImportMetaKey is the store setting an import holds while it runs: the
// export's SHA-256 and when it started, as JSON.
const ImportMetaKey = "import_in_progress"

type importMark struct {
	Export  string    `json:"export_sha256"`
	Started time.Time `json:"started_at"`
}

func interruptedImport(ctx context.Context, st memory.Store) (*importMark, error) {
	v, err := st.Meta(ctx, ImportMetaKey)
	if err != nil || v == "" {
		return nil, err
	}
	var m importMark
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return &importMark{Export: "unknown"}, nil
	}
	return &m, nil
}

// CheckNoInterruptedImport refuses a store an import did not finish: it
// holds part of an export, which served would look whole.
func CheckNoInterruptedImport(ctx context.Context, st memory.Store) error {
	m, err := interruptedImport(ctx, st)
	if err != nil || m == nil {
		return err
	}
	return memory.Errorf(memory.EUNAVAILABLE, "an import into this store did not finish (export sha256 %s, started %s): it holds part of that export. "+
		"Run `ctxd import` on the same file again to finish it (no --replace needed), or start over on an empty data dir", m.Export, m.Started.Format(time.RFC3339))
}

// importPlan reads the header, lists the export's sessions that exist and
// counts its messages.
func (a *Admin) importPlan(ctx context.Context, r io.Reader) (*ExportHeader, []memory.SessionRef, int, error) {
	var existing []memory.SessionRef
	var chk exportCheck
	p := a.progress()
	p.Begin("checking the export", 0)
	defer p.End()
	err := scanExport(r, func(rec *ExportRecord, line int) error {
		p.Add(1)
		if err := chk.see(rec, line); err != nil {
			return err
		}
		if rec.Type == RecordSession {
			s := rec.Session
			_, err := a.Store.Session(ctx, s.Tenant, s.ID)
			if err == nil {
				existing = append(existing, memory.SessionRef{Tenant: s.Tenant, ID: s.ID})
			} else if memory.ErrorCode(err) != memory.ENOTFOUND {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = chk.end()
	}
	return chk.hdr, existing, chk.messages, err
}

// CheckExport reads an export through and says whether it is whole: a
// header first, and when the header promises a trailer, a trailer last
// that says complete and counts the records before it. It returns those
// counts. EINVALID says what is wrong.
func CheckExport(r io.Reader) (*ExportReport, error) {
	var chk exportCheck
	if err := scanExport(r, chk.see); err != nil {
		return nil, err
	}
	if err := chk.end(); err != nil {
		return nil, err
	}
	return &ExportReport{Sessions: chk.sessions, Messages: chk.messages}, nil
}

// exportCheck follows an export's records, one call of see for each, and
// end tells whether what it saw is a whole export.
type exportCheck struct {
	hdr                *ExportHeader
	sess               *memory.Session // the session the messages read now follow
	trailer            *ExportTrailer
	sessions, messages int
}

func (c *exportCheck) see(rec *ExportRecord, line int) error {
	if c.trailer != nil {
		return memory.Errorf(memory.EINVALID, "export line %d: a record after the trailer", line)
	}
	if c.hdr == nil {
		if rec.Type != RecordHeader || rec.Header == nil || rec.Header.Format != ExportFormat {
			return memory.Errorf(memory.EINVALID, "not a ctxd export: the first line is not a %s header", ExportFormat)
		}
		if rec.Header.Version != ExportVersion {
			return memory.Errorf(memory.EINVALID, "export format version %d: this ctxd reads version %d", rec.Header.Version, ExportVersion)
		}
		c.hdr = rec.Header
		return nil
	}
	if err := c.checkImported(rec, line); err != nil {
		return err
	}
	switch rec.Type {
	case RecordSession:
		c.sessions++
	case RecordMessage:
		c.messages++
	case RecordTrailer:
		t := rec.Trailer
		if !t.Complete {
			return memory.Errorf(memory.EINVALID, "export line %d: the export is incomplete: its writer failed (%s)", line, t.Error)
		}
		if t.Sessions != c.sessions || t.Messages != c.messages {
			return memory.Errorf(memory.EINVALID, "export line %d: the trailer counts %d sessions and %d messages, the export has %d and %d",
				line, t.Sessions, t.Messages, c.sessions, c.messages)
		}
		c.trailer = t
	}
	return nil
}

func (c *exportCheck) end() error {
	switch {
	case c.hdr == nil:
		return memory.Errorf(memory.EINVALID, "not a ctxd export: empty")
	case c.hdr.Trailer && c.trailer == nil:
		return memory.Errorf(memory.EINVALID, "the export is cut short: it ends without its trailer, after %d sessions and %d messages", c.sessions, c.messages)
	}
	return nil
}

// importModel decides whether the exported vectors can be kept: only when
// they come from the model this data dir uses (or will use, when empty).
func (a *Admin) importModel(ctx context.Context, hdr *ExportHeader) (bool, error) {
	model, dim, err := a.Model(ctx)
	if err != nil {
		return false, err
	}
	if model == "" {
		emb, err := a.embedder(ctx)
		if err != nil {
			return false, err
		}
		if err := a.recordModel(ctx, emb); err != nil {
			return false, err
		}
		model, dim = emb.Model(), emb.Dim()
	}
	keep := hdr.Vectors && hdr.EmbedModel == model && hdr.EmbedDim == dim
	if !keep {
		a.logger().Info("import embeds every message", "export_model", hdr.EmbedModel, "data_dir_model", model, "export_has_vectors", hdr.Vectors)
	}
	return keep, nil
}

// importSession embeds what needs it and writes the session; it returns how
// many messages were embedded.
func (a *Admin) importSession(ctx context.Context, s *memory.Session, msgs []*memory.Message, useVectors bool) (int, error) {
	var embed []*memory.Message
	for _, m := range msgs {
		if !useVectors || len(m.Vector) == 0 {
			m.Vector = nil
			embed = append(embed, m)
		}
	}
	if err := a.embed(ctx, embed, nil); err != nil {
		return 0, fmt.Errorf("session %s: %w", s.ID, err)
	}
	if _, err := a.Store.Import(ctx, s, msgs); err != nil {
		return 0, fmt.Errorf("import session %s: %w", s.ID, err)
	}
	a.progress().Add(len(msgs))
	return len(embed), nil
}

// importCold writes the mirror files of the imported sessions with cold
// messages, and drops those of replaced sessions that have none now.
func (a *Admin) importCold(ctx context.Context, replaced, cold []memory.SessionRef) error {
	if a.Cold == nil {
		return nil
	}
	for _, s := range replaced {
		if err := a.Cold.Remove(s.Tenant, s.ID); err != nil {
			return fmt.Errorf("remove cold mirror of replaced session %s: %w", s.ID, err)
		}
	}
	for _, s := range cold {
		if err := a.rewriteCold(ctx, s.Tenant, s.ID); err != nil {
			return err
		}
	}
	return nil
}

// readExport calls fn with each session of an export and its messages.
func readExport(r io.Reader, fn func(*memory.Session, []*memory.Message) error) error {
	var sess *memory.Session
	var msgs []*memory.Message
	flush := func() error {
		if sess == nil {
			return nil
		}
		err := fn(sess, msgs)
		sess, msgs = nil, nil
		return err
	}
	err := scanExport(r, func(rec *ExportRecord, line int) error {
		switch rec.Type {
		case RecordHeader, RecordTrailer:
			return nil
		case RecordSession:
			if err := flush(); err != nil {
				return err
			}
			sess = rec.Session
		case RecordMessage:
			if sess == nil {
				return memory.Errorf(memory.EINVALID, "export line %d: a message before any session", line)
			}
			m := rec.Message
			if m.Tenant == "" {
				m.Tenant = sess.Tenant
			}
			if m.SessionID == "" {
				m.SessionID = sess.ID
			}
			m.Vector = rec.Vector
			msgs = append(msgs, m)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// scanExport decodes an export line by line. Metadata numbers are kept as
// written (json.Number), so integers of any size survive the round trip.
func scanExport(r io.Reader, fn func(*ExportRecord, int) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), maxExportLine)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		var rec ExportRecord
		if err := dec.Decode(&rec); err != nil {
			return memory.Errorf(memory.EINVALID, "export line %d: %v", line, err)
		}
		if err := rec.check(); err != nil {
			return memory.Errorf(memory.EINVALID, "export line %d: %v", line, err)
		}
		if err := fn(&rec, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return memory.Errorf(memory.EINVALID, "export line %d: longer than %d bytes", line+1, maxExportLine)
		}
		return fmt.Errorf("read export: %w", err)
	}
	return nil
}

func (rec *ExportRecord) check() error {
	switch rec.Type {
	case RecordHeader:
		if rec.Header == nil {
			return fmt.Errorf("header record without a header")
		}
	case RecordSession:
		if rec.Session == nil {
			return fmt.Errorf("session record without a session")
		}
		if err := memory.ValidateSessionID(rec.Session.ID); err != nil {
			return err
		}
	case RecordMessage:
		if rec.Message == nil || rec.Message.ID == "" || !rec.Message.State.Valid() {
			return fmt.Errorf("message record without a message id or a valid state")
		}
	case RecordTrailer:
		if rec.Trailer == nil {
			return fmt.Errorf("trailer record without a trailer")
		}
	default:
		return fmt.Errorf("unknown record type %q", rec.Type)
	}
	return nil
}
