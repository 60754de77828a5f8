package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Admin is the offline maintenance of a data dir (reindex, export, import,
// verify): the server is stopped, so nothing else writes the store. Fields
// are set before use; Index, Docs and Cold are optional for verbs that do
// not need them.
type Admin struct {
	Store Store
	Index Index
	// IndexErr is why Index is nil when the index could not be opened
	// (missing, corrupt): verify reports it.
	IndexErr error // ErrIndexNoAccess: see there
	// Docs lists the documents of Index (the same index).
	Docs DocLister
	// Cold is the cold mirror, read back by verify and written by import.
	Cold ColdAuditor
	// Embedder opens the configured embedder on first need: most runs never
	// embed anything, and opening one can cost a model load or a request.
	Embedder func(context.Context) (Embedder, error)
	Logger   *slog.Logger
	Progress Progress
	Now      func() time.Time

	emb Embedder
}

// IndexDoc is what the full-text index holds of one message.
type IndexDoc struct {
	ID, Tenant, SessionID string
	State                 State
}

// MirrorFile is a session's cold mirror as read back.
type MirrorFile struct {
	Lines     []MirrorLine
	TornBytes int   // a last line without a newline (a cut write)
	BadLines  []int // 1-based numbers of complete lines that do not parse
}

// MirrorLine is one readable line of a mirror file.
type MirrorLine struct{ ID, Fingerprint string }

type noProgress struct{}

func (noProgress) Begin(string, int) {}
func (noProgress) Add(int)           {}
func (noProgress) End()              {}

func (a *Admin) progress() Progress {
	if a.Progress == nil {
		return noProgress{}
	}
	return a.Progress
}

func (a *Admin) logger() *slog.Logger {
	if a.Logger == nil {
		return slog.Default()
	}
	return a.Logger
}

func (a *Admin) now() time.Time {
	if a.Now == nil {
		return time.Now()
	}
	return a.Now()
}

// Model is the embedding model and dimension a data dir's vectors were made
// with ("" and 0 for a data dir that never had any).
func (a *Admin) Model(ctx context.Context) (string, int, error) {
	return readModel(func(key string) (string, error) { return a.Store.Meta(ctx, key) })
}

// readModel reads the model's settings with meta: from the store, or from
// an export's snapshot.
func readModel(meta func(key string) (string, error)) (string, int, error) {
	model, err := meta(metaEmbedModel)
	if err != nil {
		return "", 0, fmt.Errorf("read embedding model: %w", err)
	}
	d, err := meta(metaEmbedDim)
	if err != nil {
		return "", 0, fmt.Errorf("read embedding dim: %w", err)
	}
	dim, _ := strconv.Atoi(d)
	return model, dim, nil
}

// embedder returns the configured embedder, refusing one of another model
// than the data dir's: vectors of two models must never mix.
func (a *Admin) embedder(ctx context.Context) (Embedder, error) {
	if a.emb != nil {
		return a.emb, nil
	}
	if a.Embedder == nil {
		return nil, Errorf(EUNAVAILABLE, "no embedder configured")
	}
	emb, err := a.Embedder(ctx)
	if err != nil {
		return nil, fmt.Errorf("open embedder: %w", err)
	}
	model, _, err := a.Model(ctx)
	if err != nil {
		return nil, err
	}
	if model != "" && model != emb.Model() {
		return nil, Errorf(ECONFLICT, "data dir was embedded with model %q but the embedder configured here is %q: configure the data dir's model (--embed-url, --embed-model), or start the server once with --reembed", model, emb.Model())
	}
	a.emb = emb
	return emb, nil
}

// recordModel writes the embedder's model and dim into a data dir that has
// none yet (an import into an empty dir), as the server does at start.
func (a *Admin) recordModel(ctx context.Context, emb Embedder) error {
	if err := a.Store.SetMeta(ctx, metaEmbedDim, strconv.Itoa(emb.Dim())); err != nil {
		return fmt.Errorf("record embedding dim: %w", err)
	}
	if err := a.Store.SetMeta(ctx, metaEmbedModel, emb.Model()); err != nil {
		return fmt.Errorf("record embedding model: %w", err)
	}
	return nil
}

func (a *Admin) indexer() *indexer {
	return &indexer{store: a.Store, index: a.Index, log: a.logger().With("component", "indexer")}
}

// CatchUp brings the index up to the store through the change log, the path
// the server takes at start, then lets the store forget what the index holds.
func (a *Admin) CatchUp(ctx context.Context) error {
	ix := a.indexer()
	if err := ix.catchUp(ctx, time.Now()); err != nil {
		return err
	}
	if err := ix.trim(ctx); err != nil {
		return fmt.Errorf("trim change log: %w", err)
	}
	return nil
}

// embed gives msgs vectors from the configured embedder, in batches, and
// hands each batch to save (nil: only set m.Vector); a saved batch counts as
// progress.
func (a *Admin) embed(ctx context.Context, msgs []*Message, save func(map[string][]float32) error) error {
	if len(msgs) == 0 {
		return nil
	}
	emb, err := a.embedder(ctx)
	if err != nil {
		return err
	}
	const batch = 256
	for start := 0; start < len(msgs); start += batch {
		part := msgs[start:min(start+batch, len(msgs))]
		texts := make([]string, len(part))
		for i, m := range part {
			texts[i] = EmbedText(m)
		}
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("embed %d messages: %w", len(part), err)
		}
		byID := make(map[string][]float32, len(part))
		for i, m := range part {
			m.Vector = vecs[i]
			byID[m.ID] = vecs[i]
		}
		if save != nil {
			if err := save(byID); err != nil {
				return fmt.Errorf("store new vectors: %w", err)
			}
			a.progress().Add(len(part))
		}
	}
	return nil
}

// ErrIndexNoAccess marks an index ctxd may not read or write (permissions,
// a read-only file system): verify reports it as such rather than as
// damage, and nothing rebuilds it (that would fail the same way, or throw a
// good index away).
var ErrIndexNoAccess = errors.New("index is not accessible (not damaged)")
