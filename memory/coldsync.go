package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MsgRef names a message in a finding.
type MsgRef struct{ ID, Tenant, SessionID string }

type sessionKey struct{ Tenant, ID string }

// Kinds of mirror damage CompareMirror finds (verify reports them too).
const (
	FindColdMissing = "cold_missing"    // a cold message has no mirror line
	FindColdStale   = "cold_stale"      // a mirror line differs from the store or names no cold message
	FindColdTorn    = "cold_torn"       // a mirror file ends in a cut line
	FindColdBad     = "cold_unreadable" // a mirror file has lines that do not parse
)

// CompareMirror compares one session's mirror file with msgs, the session's
// stored messages that went cold (in a cold state, or recovered with the
// line they were given when they went cold), and reports each difference to
// add: each of msgs needs a line that agrees with the store (the last line
// of its id; see ColdAuditor.Fingerprint for what must agree), a recovered
// one too (dropped again, it writes none: see Mirrored), and a line may
// only name one of msgs. verify and start-up's
// reconciliation judge a file by the same rules.
//
// Lines of the ids in damaged (records that fail their checksum) are not
// differences: such a line may be the last good copy of its message.
func CompareMirror(cold ColdAuditor, sess MsgRef, file MirrorFile, msgs []*Message, damaged map[string]bool, add func(kind string, m MsgRef, format string, args ...any)) error {
	if file.TornBytes > 0 {
		add(FindColdTorn, sess, "last line cut short (%d bytes without a newline)", file.TornBytes)
	}
	if len(file.BadLines) > 0 {
		add(FindColdBad, sess, "%d unreadable line(s), first line %d", len(file.BadLines), file.BadLines[0])
	}
	if file.BadSegments > 0 {
		add(FindColdBad, sess, "%d damaged compressed segment(s) (%d bytes)", file.BadSegments, file.BadBytes)
	}
	last := make(map[string]string, len(file.Lines))
	for _, l := range file.Lines {
		last[l.ID] = l.Fingerprint
	}
	wentCold := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		wentCold[m.ID] = true
		ref := MsgRef{m.ID, m.Tenant, m.SessionID}
		fp, err := cold.Fingerprint(m)
		if err != nil {
			return err
		}
		line, ok := last[m.ID]
		switch {
		case !ok:
			add(FindColdMissing, ref, "%s message has no line in the cold mirror", m.State)
		case ok && line != fp:
			add(FindColdStale, ref, "mirror line differs from the store")
		}
	}
	seen := map[string]bool{}
	for _, l := range file.Lines {
		if !wentCold[l.ID] && !seen[l.ID] && !damaged[l.ID] {
			seen[l.ID] = true
			add(FindColdStale, MsgRef{l.ID, sess.Tenant, sess.SessionID}, "mirror line names no stored cold message")
		}
	}
	return nil
}

// reconcileCold makes every session's mirror file agree with the store
// before the service answers. A compaction writes the mirror after its
// store transaction commits, a purge or an edit rewrites it after theirs,
// and a deleted session's file goes just before: a kill -9 in between
// leaves lines missing (69 after 25 kill rounds during compactions) or
// stale, and nothing else would ever write them. A file that differs is
// rewritten from the store (Rewrite: atomic), as `verify --repair` does.
//
// A file of a session the store does not have is left alone and logged:
// DeleteSession removes the file before the session, so no crash makes one,
// and the store losing sessions is the likelier story. The file may then
// be the last copy of its cold originals (`verify --repair` removes it).
//
// It reads every session's cold messages and every mirror file once;
// sessions with neither are skipped without a read.
func (s *Service) reconcileCold(ctx context.Context) error {
	audit, ok := s.Cold.(ColdAuditor)
	if !ok {
		return nil // no mirror, or one that cannot be read back
	}
	start := time.Now()
	files, err := audit.MirrorSessions()
	if err != nil {
		return fmt.Errorf("reconcile cold mirror: list files: %w", err)
	}
	hasFile := make(map[sessionKey]bool, len(files))
	for _, f := range files {
		hasFile[sessionKey(f)] = true
	}
	checked, rewritten := 0, 0
	err = s.forEachSession(ctx, func(sess *Session) error {
		k := sessionKey{sess.Tenant, sess.ID}
		had := hasFile[k]
		delete(hasFile, k)
		if !had && sess.Counts.Dropped+sess.Counts.Summarized == 0 {
			return nil
		}
		checked++
		fixed, err := s.reconcileColdSession(ctx, audit, sess.Tenant, sess.ID)
		if fixed {
			rewritten++
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("reconcile cold mirror: %w", err)
	}
	for k := range hasFile {
		s.Logger.Warn("cold mirror file of a session the store does not have; kept (ctxd verify --repair removes it)",
			"tenant", k.Tenant, "session", k.ID)
	}
	if rewritten > 0 {
		s.Logger.Warn("cold mirror reconciled with the store", "sessions_checked", checked, "files_rewritten", rewritten,
			"took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// reconcileColdSession rewrites one session's mirror file from the store if
// it differs (see CompareMirror), and says whether it did. It holds the
// session's lock, so it may run while the service serves.
func (s *Service) reconcileColdSession(ctx context.Context, audit ColdAuditor, tenant, id string) (bool, error) {
	unlock := s.lockSession(ctx, tenant, id)
	defer unlock()
	coldNow, err := s.Store.Messages(ctx, tenant, id, MessageQuery{States: MirrorStates})
	if ErrorCode(err) == EDAMAGED {
		// Rewriting from a store that cannot read a record would drop the
		// mirror's line of it, perhaps its last good copy: leave the file
		// as it is (verify names the record; see DamagedRecord).
		s.Logger.Error("cold mirror not reconciled: a stored record is damaged", "tenant", tenant, "session", id, "err", err)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read cold messages of %s: %w", id, err)
	}
	file, err := audit.ReadMirror(tenant, id)
	if err != nil {
		return false, fmt.Errorf("read cold mirror of %s: %w", id, err)
	}
	coldNow = Mirrored(coldNow)
	// Lines may name messages of other states that went cold once: read
	// what the store has of the ids the states above did not cover.
	msgs := slices.Clone(coldNow)
	have := make(map[string]bool, len(coldNow))
	for _, m := range coldNow {
		have[m.ID] = true
	}
	var others []string
	for _, l := range file.Lines {
		if !have[l.ID] {
			have[l.ID] = true
			others = append(others, l.ID)
		}
	}
	if len(others) > 0 {
		found, err := s.Store.MessagesByID(ctx, tenant, others, false)
		if ErrorCode(err) == EDAMAGED {
			s.Logger.Error("cold mirror not reconciled: a stored record is damaged", "tenant", tenant, "session", id, "err", err)
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read messages named by the cold mirror of %s: %w", id, err)
		}
		for _, m := range found {
			if m.SessionID == id && m.Cold != nil {
				msgs = append(msgs, m)
			}
		}
	}
	slices.SortFunc(msgs, func(x, y *Message) int { return cmp.Compare(x.Seq, y.Seq) })
	var kinds, damage []string
	err = CompareMirror(audit, MsgRef{Tenant: tenant, SessionID: id}, file, msgs, nil, func(kind string, _ MsgRef, format string, args ...any) {
		kinds = append(kinds, kind)
		if kind == FindColdTorn || kind == FindColdBad {
			// Damage to the file itself, not a line behind the store: say what.
			damage = append(damage, fmt.Sprintf(format, args...))
		}
	})
	if err != nil || len(kinds) == 0 {
		return false, err
	}
	if err := audit.Rewrite(tenant, id, msgs); err != nil {
		return false, fmt.Errorf("rewrite cold mirror of %s: %w", id, err)
	}
	attrs := []any{"tenant", tenant, "session", id, "differences", len(kinds)}
	if len(damage) > 0 {
		attrs = append(attrs, "damage", strings.Join(damage, "; "))
	}
	s.Logger.Info("cold mirror file rewritten from the store", attrs...)
	return true, nil
}
