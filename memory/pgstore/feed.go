package pgstore

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/ctxd/ctxd/memory"
	"github.com/jackc/pgx/v5"
)

// The change feed is gapless and in commit order: the indexer of every
// node follows it from its watermark, and takes a gap for a trimmed log.
// A write does not number its own changes: a number taken inside the
// write's transaction either serializes every write of the database (a
// counter row locked to commit: measured 2.5-3.5 ms a write whatever the
// number of writers, with fsync at 1 ms) or leaves holes that a reader
// cannot tell from a transaction still in flight with a smaller number
// (a sequence: it commits after the reader moved past it, and is skipped
// for good). So a write queues its changes (change_queue, an identity
// column) and commits with no lock but its session's; then a numbering
// pass, under the counter's row lock, moves every queued change that is
// committed into the feed, numbered in queue order. What a pass cannot see
// is not committed and goes into a later pass, after every number this
// one gave: numbers follow commits. A session's writes take turns on its
// row, so their queue order is their commit order.
//
// The writer runs the pass after its commit, before it answers, so what
// it acknowledges is in the feed; and LastSeq runs one when the queue is
// not empty, so the changes of a node that died between its commit and
// its pass are numbered by the next reader. Concurrent writers' passes
// take turns on the counter, each covering all that committed before it:
// one pass orders many writes (group commit), not one.

// queueChanges queues a write's changes, in the write's transaction.
func queueChanges(ctx context.Context, tx pgx.Tx, changes []memory.Change) error {
	if len(changes) == 0 {
		return nil
	}
	rows := make([][]any, len(changes))
	for i, c := range changes {
		rows[i] = []any{c.Tenant, string(c.Op), c.SessionID, c.MessageID}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"change_queue"}, []string{"tenant", "op", "session_id", "message_id"}, pgx.CopyFromRows(rows))
	return err
}

// loggedTx runs fn in a transaction that queues changes, and after its
// commit numbers them.
func (s *Store) loggedTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if err := s.inTx(ctx, fn); err != nil {
		return err
	}
	s.numbered()
	return nil
}

// numbers shares numbering passes among a node's writers: a writer joins
// the next pass to start (one that starts after its commit, so it sees
// its changes), and one pass runs at a time. Writers arriving during a
// pass all wait for the one after it, rather than each running its own.
type numbers struct {
	mu      sync.Mutex
	next    *pass // the pass writers join; nil when none waits
	running bool
}

type pass struct {
	done chan struct{}
	err  error
}

// numbered returns once a numbering pass that started after the caller's
// commit has ended. A failed pass does not fail the write, which is
// durable: the next LastSeq on any node numbers it.
func (s *Store) numbered() {
	n := &s.numbers
	n.mu.Lock()
	if n.next == nil {
		n.next = &pass{done: make(chan struct{})}
		if !n.running {
			n.running = true
			go s.runPasses()
		}
	}
	p := n.next
	n.mu.Unlock()
	<-p.done
}

func (s *Store) runPasses() {
	n := &s.numbers
	for {
		n.mu.Lock()
		p := n.next
		n.next = nil
		n.running = p != nil
		n.mu.Unlock()
		if p == nil {
			return
		}
		p.err = s.number(context.Background())
		close(p.done)
	}
}

var errNothingQueued = errors.New("no change queued")

// number moves the committed queued changes into the feed.
func (s *Store) number(ctx context.Context) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var last int64
		if err := tx.QueryRow(ctx, `SELECT seq FROM change_counter WHERE tenant = $1 FOR UPDATE`, storeWide).Scan(&last); err != nil {
			return err
		}
		// The snapshot of this statement is taken after the lock: a pass
		// that held it before committed, and its deletions are seen.
		rows, err := tx.Query(ctx, `/* all tenants: one pass numbers every tenant's changes */
			DELETE FROM change_queue RETURNING id, tenant, op, session_id, message_id`)
		if err != nil {
			return err
		}
		type queued struct {
			id  int64
			row []any
		}
		var q []queued
		for rows.Next() {
			var id int64
			var tenant, op, session, message string
			if err := rows.Scan(&id, &tenant, &op, &session, &message); err != nil {
				return err
			}
			q = append(q, queued{id, []any{tenant, op, session, message}})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(q) == 0 {
			return errNothingQueued // rolled back: nothing to flush to disk
		}
		slices.SortFunc(q, func(a, b queued) int { return int(min(max(a.id-b.id, -1), 1)) })
		out := make([][]any, len(q))
		for i, c := range q {
			out[i] = append([]any{c.row[0], last + int64(i) + 1}, c.row[1:]...)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"changes"}, []string{"tenant", "seq", "op", "session_id", "message_id"}, pgx.CopyFromRows(out)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE change_counter SET seq = $2 WHERE tenant = $1`, storeWide, last+int64(len(q)))
		return err
	})
	if errors.Is(err, errNothingQueued) {
		return nil
	}
	return err
}

// LastSeq is the newest change's seq, once the committed queued changes
// are numbered.
func (s *Store) LastSeq(ctx context.Context) (uint64, error) {
	var seq int64
	var queued bool
	err := s.pool.QueryRow(ctx, `/* all tenants: are any tenant's changes waiting for a number? */
		SELECT seq, EXISTS (SELECT 1 FROM change_queue) FROM change_counter WHERE tenant = $1`, storeWide).Scan(&seq, &queued)
	if err != nil || !queued {
		return uint64(seq), dbErr(err)
	}
	if err := s.number(ctx); err != nil {
		return 0, dbErr(err)
	}
	err = s.pool.QueryRow(ctx, `SELECT seq FROM change_counter WHERE tenant = $1`, storeWide).Scan(&seq)
	return uint64(seq), dbErr(err)
}

// TrimChanges forgets entries up to upTo, keeping the newest KeepChanges
// all the same: other nodes may not have them yet.
func (s *Store) TrimChanges(ctx context.Context, upTo uint64) error {
	_, err := s.pool.Exec(ctx, `/* all tenants: the feed is trimmed as a whole */
		DELETE FROM changes WHERE seq <= least($2, (SELECT seq FROM change_counter WHERE tenant = $1) - $3)`, storeWide, int64(upTo), int64(s.keep))
	return dbErr(err)
}
