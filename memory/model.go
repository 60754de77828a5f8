package memory

import (
	"context"
	"fmt"
	"strconv"
)

const (
	MetaEmbedModel = "embed_model"
	MetaEmbedDim   = "embed_dim"
)

// checkModel makes sure the stored vectors came from the configured embedder:
// vectors of two models are not comparable and must never be mixed.
func (s *Service) checkModel(ctx context.Context) error {
	stored, err := s.Store.Meta(ctx, MetaEmbedModel)
	if err != nil {
		return fmt.Errorf("read embedding model: %w", err)
	}
	want := s.Embedder.Model()
	if stored == want {
		return nil
	}
	last, err := s.Store.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("read store seq: %w", err)
	}
	if stored != "" && last > 0 {
		if !s.Reembed {
			return Errorf(ECONFLICT, "data dir was embedded with model %q but the server is configured with %q: start with --reembed to re-embed every message, or configure the old model", stored, want)
		}
		if err := s.reembed(ctx, stored, want); err != nil {
			return err
		}
	}
	if err := s.Store.SetMeta(ctx, MetaEmbedDim, strconv.Itoa(s.Embedder.Dim())); err != nil {
		return fmt.Errorf("record embedding dim: %w", err)
	}
	if err := s.Store.SetMeta(ctx, MetaEmbedModel, want); err != nil {
		return fmt.Errorf("record embedding model: %w", err)
	}
	return nil
}

// reembed computes new vectors for every stored message, in batches, logging
// progress. The model name is written only after the last batch, so a crash
// part-way leaves the old name and the next start re-embeds again.
func (s *Service) reembed(ctx context.Context, from, to string) error {
	s.Logger.Warn("re-embedding every message with a new model", "from", from, "to", to)
	const batch = 256
	var ids, texts []string
	done := 0
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		vecs, err := s.embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("re-embed: %w", err)
		}
		m := make(map[string][]float32, len(ids))
		for i, id := range ids {
			m[id] = vecs[i]
		}
		if err := s.Store.ReplaceVectors(ctx, m); err != nil {
			return fmt.Errorf("store new vectors: %w", err)
		}
		done += len(ids)
		s.Logger.Info("re-embedding", "done", done)
		ids, texts = ids[:0], texts[:0]
		return nil
	}
	// Collect texts first: ReplaceVectors writes, and bbolt forbids a write
	// transaction inside the read one ForEachMessage holds.
	var all []*Message
	if err := s.Store.ForEachMessage(ctx, func(m *Message) error {
		m.Vector = nil
		all = append(all, m)
		return nil
	}); err != nil {
		return fmt.Errorf("read messages to re-embed: %w", err)
	}
	for _, m := range all {
		ids = append(ids, m.ID)
		texts = append(texts, EmbedText(m))
		if len(ids) == batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	s.Logger.Info("re-embedding done", "messages", done, "model", to)
	return nil
}
