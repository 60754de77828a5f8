package coldstore

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ctxd/ctxd/memory"
)

var _ memory.ColdAuditor = Mirror{}

// MirrorSessions lists the sessions that have a file.
func (m Mirror) MirrorSessions() ([]memory.SessionRef, error) {
	refs, err := m.Store.Sessions()
	if err != nil {
		return nil, err
	}
	out := make([]memory.SessionRef, len(refs))
	for i, r := range refs {
		out[i] = memory.SessionRef{Tenant: r.Tenant, ID: r.Session}
	}
	return out, nil
}

// ReadMirror reads a session's file back: each readable line's chunk id and
// fingerprint, and the damage Read found.
func (m Mirror) ReadMirror(tenant, session string) (memory.MirrorFile, error) {
	chunks, err := m.Store.Read(tenant, session)
	var out memory.MirrorFile
	var dmg *DamageError
	if errors.As(err, &dmg) {
		out.TornBytes, out.BadLines = dmg.TornBytes, dmg.BadLines
		out.BadSegments, out.BadBytes = dmg.BadSegments, dmg.BadBytes
	} else if err != nil {
		return out, err
	}
	for _, c := range chunks {
		fp, err := fingerprint(c)
		if err != nil {
			return out, err
		}
		out.Lines = append(out.Lines, memory.MirrorLine{ID: c.ChunkID, Fingerprint: fp})
	}
	return out, nil
}

// Fingerprint is the canonical form of the chunk msg would be written as.
func (m Mirror) Fingerprint(msg *memory.Message) (string, error) {
	return fingerprint(ChunkOf(msg))
}

// fingerprint encodes a chunk the same way whether it was read from a file
// (metadata numbers as json.Number) or made from a stored message (float64):
// both encode to the same text for the same value.
//
// It leaves out how the chunk went cold (reason, score, threshold, prompt,
// summary): a line is written once, when its message first goes cold, and
// a message dropped again after a recovery, or released by a rolled
// summary, changes those in the store but keeps its line. Compared, every
// rolled summary's sources read as stale (272 lines of one session after
// 150 turns in a 1,200-token window, no crash needed). What a line must
// keep true is the message and its retention: ids, content, role, tokens,
// name, metadata, version, when it was written, first dropped and
// recoverable until (a re-drop keeps the first two; an edit or purge
// rewrites the file).
func fingerprint(c Chunk) (string, error) {
	c.DropReason, c.RelevanceScore, c.Threshold, c.PromptAtDrop, c.SummaryID = "", 0, 0, "", ""
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("fingerprint chunk %s: %w", c.ChunkID, err)
	}
	return string(b), nil
}
