package index

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Truth is the store the index is derived from: its change log's last
// entry, and the text of hits (Options.Texts).
type Truth interface {
	TextSource
	// LastSeq is the Seq of the newest change-log entry.
	LastSeq(ctx context.Context) (uint64, error)
}

// ErrAhead marks an index that holds changes the store does not: the store
// lost its newest writes (a bbolt file whose newest meta page was lost
// falls back to the one before, silently), or it was replaced by an older
// copy. The index is the evidence of what was lost; rebuilding it from the
// store would erase that evidence and serve the rolled-back store as whole.
var ErrAhead = errors.New("the full-text index is ahead of the store")

// OpenOrRebuild opens the index at dir, and when it cannot be used sets it
// up to be rebuilt from the store, the truth: one that cannot be opened, or
// (with allowAhead) that is ahead of the store, is moved aside to
// dir.broken-UNIXTIME, for a post-mortem; one written with another schema
// (an upgrade) is removed. Either way a new, empty index is opened, which
// the service fills from the change log. An index ahead of the store
// without allowAhead is ErrAhead, and nothing is moved. An index held by
// another process or an unreadable dir is an error, not damage: nothing is
// moved. Search snippets are cut from the store's text (the index does not
// keep it).
func OpenOrRebuild(log *slog.Logger, dir string, opts Options, store Truth, allowAhead bool) (*Index, error) {
	opts.Texts = store
	idx, err := Open(dir, opts)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return nil, err
	}
	if err == nil {
		wm, werr := idx.Watermark()
		last, lerr := store.LastSeq(context.Background())
		if werr == nil && lerr == nil && wm <= last {
			return idx, nil
		}
		idx.Close()
		if werr == nil && lerr == nil && !allowAhead {
			return nil, fmt.Errorf("%w: the index holds changes up to %d, the store only up to %d (%d changes the store acknowledged are gone from it)", ErrAhead, wm, last, wm-last)
		}
		err = fmt.Errorf("index watermark %d is ahead of the store (%d) or unreadable (%v)", wm, last, errors.Join(werr, lerr))
	}
	if errors.Is(err, ErrSchema) {
		// An upgrade, not damage: nothing to keep for a post-mortem.
		log.Warn("index written by another version of ctxd; rebuilding it from the store", "err", err)
		if rerr := Remove(dir); rerr != nil {
			return nil, rerr
		}
		return Open(dir, opts)
	}
	aside := fmt.Sprintf("%s.broken-%d", dir, time.Now().Unix())
	log.Error("index unusable; moving it aside and rebuilding from the store", "err", err, "moved_to", aside)
	if rerr := os.Rename(dir, aside); rerr != nil && !os.IsNotExist(rerr) {
		return nil, fmt.Errorf("move aside broken index %s: %w", dir, rerr)
	}
	return Open(dir, opts)
}
