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

// OpenOrRebuild opens the index at dir, and when it cannot be used sets it
// up to be rebuilt from the store, the truth: one that cannot be opened, or
// that is ahead of the store (it belongs to another store), is moved aside
// to dir.broken-UNIXTIME, for a post-mortem; one written with another
// schema (an upgrade) is removed. Either way a new, empty index is opened,
// which the service fills from the change log. An index held by another
// process or an unreadable dir is an error, not damage: nothing is moved.
// Search snippets are cut from the store's text (the index does not keep it).
func OpenOrRebuild(log *slog.Logger, dir string, opts Options, store Truth) (*Index, error) {
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
