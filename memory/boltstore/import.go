package boltstore

import (
	"context"
	"fmt"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// Import writes an exported session back with its messages' own ids, seqs
// and states. Counters are derived data: they are rebuilt from the messages
// with account, the same arithmetic every other write uses, so an import can
// not bring in a session whose totals disagree with its messages.
func (s *Store) Import(ctx context.Context, sess *memory.Session, msgs []*memory.Message) (*memory.Session, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	out := *sess
	out.Counts, out.Tokens, out.Summaries, out.Prunable = memory.Counts{}, 0, 0, nil
	var pinned int
	out.PinnedTokens = &pinned
	seen := make(map[uint64]bool, len(msgs))
	for _, m := range msgs {
		if m.Tenant != sess.Tenant || m.SessionID != sess.ID {
			return nil, memory.Errorf(memory.EINVALID, "message %s belongs to %q/%q, not %q/%q", m.ID, m.Tenant, m.SessionID, sess.Tenant, sess.ID)
		}
		if m.ID == "" || m.Seq == 0 || seen[m.Seq] {
			return nil, memory.Errorf(memory.EINVALID, "message %q of session %s: empty id, or seq %d missing or repeated", m.ID, sess.ID, m.Seq)
		}
		seen[m.Seq] = true
		out.LastSeq = max(out.LastSeq, m.Seq)
	}
	err := s.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketSessions).Get(sessionKey(sess.Tenant, sess.ID)) != nil {
			return memory.Errorf(memory.ECONFLICT, "session %q of tenant %q exists already", sess.ID, sess.Tenant)
		}
		for _, m := range msgs {
			if err := putMessage(tx, m, nil); err != nil {
				return fmt.Errorf("import session %s: %w", sess.ID, err)
			}
			out.Account(m, +1)
		}
		return putSession(tx, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}
