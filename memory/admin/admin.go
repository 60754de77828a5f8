package admin

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// Admin is the offline maintenance of a data dir (reindex, export, import,
// verify): the server is stopped, so nothing else writes the store. Fields
// are set before use; Index, Docs and Cold are optional for verbs that do
// not need them.
type Admin struct {
	Store memory.Store
	Index memory.Index
	// IndexErr is why Index is nil when the index could not be opened
	// (missing, corrupt): verify reports it.
	IndexErr error // memory.ErrIndexNoAccess: see there
	// Docs lists the documents of Index (the same index).
	Docs memory.DocLister
	// Cold is the cold mirror, read back by verify and written by import.
	Cold memory.ColdAuditor
	// Embedder opens the configured embedder on first need: most runs never
	// embed anything, and opening one can cost a model load or a request.
	Embedder func(context.Context) (memory.Embedder, error)
	Logger   *slog.Logger
	Progress memory.Progress
	Now      func() time.Time

	emb memory.Embedder
}

type noProgress struct{}

func (noProgress) Begin(string, int) {}
func (noProgress) Add(int)           {}
func (noProgress) End()              {}

func (a *Admin) progress() memory.Progress {
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
	model, err := meta(memory.MetaEmbedModel)
	if err != nil {
		return "", 0, fmt.Errorf("read embedding model: %w", err)
	}
	d, err := meta(memory.MetaEmbedDim)
	if err != nil {
		return "", 0, fmt.Errorf("read embedding dim: %w", err)
	}
	dim, _ := strconv.Atoi(d)
	return model, dim, nil
}

// embedder returns the configured embedder, refusing one of another model
// than the data dir's: vectors of two models must never mix.
func (a *Admin) embedder(ctx context.Context) (memory.Embedder, error) {
	if a.emb != nil {
		return a.emb, nil
	}
	if a.Embedder == nil {
		return nil, memory.Errorf(memory.EUNAVAILABLE, "no embedder configured")
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
		return nil, memory.Errorf(memory.ECONFLICT, "data dir was embedded with model %q but the embedder configured here is %q: configure the data dir's model (--embed-url, --embed-model), or start the server once with --reembed", model, emb.Model())
	}
	a.emb = emb
	return emb, nil
}

// recordModel writes the embedder's model and dim into a data dir that has
// none yet (an import into an empty dir), as the server does at start.
func (a *Admin) recordModel(ctx context.Context, emb memory.Embedder) error {
	if err := a.Store.SetMeta(ctx, memory.MetaEmbedDim, strconv.Itoa(emb.Dim())); err != nil {
		return fmt.Errorf("record embedding dim: %w", err)
	}
	if err := a.Store.SetMeta(ctx, memory.MetaEmbedModel, emb.Model()); err != nil {
		return fmt.Errorf("record embedding model: %w", err)
	}
	return nil
}

func (a *Admin) indexLog() *slog.Logger { return a.logger().With("component", "indexer") }

// CatchUp brings the index up to the store through the change log, the path
// the server takes at start, then lets the store forget what the index holds.
func (a *Admin) CatchUp(ctx context.Context) error {
	return memory.CatchUpIndex(ctx, a.Store, a.Index, a.indexLog())
}

// embed gives msgs vectors from the configured embedder, in batches, and
// hands each batch to save (nil: only set m.Vector); a saved batch counts as
// progress.
func (a *Admin) embed(ctx context.Context, msgs []*memory.Message, save func(map[string][]float32) error) error {
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
			texts[i] = memory.EmbedText(m)
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
