package admin

import (
	"context"
	"fmt"

	"github.com/ctxd/ctxd/memory"
)

// RestoreColdReport says what RestoreCold brought back.
type RestoreColdReport struct {
	Sessions int `json:"sessions"`
	Messages int `json:"messages"`
	// Kept counts the mirror files of sessions the store has: those are
	// left to verify, which compares them line by line.
	Kept int `json:"kept"`
}

// RestoreCold imports into the store the cold originals of every session
// the store lacks but the cold mirror has: after the store was lost, the
// mirror is their last copy. Each comes back as a session holding its cold
// messages (dropped or summarized, in file order, with their ids), with
// the server's default settings (the lost session's settings and its
// window were only in the store), new vectors from the configured
// embedder, and an upsert logged for each so the index picks them up at
// the next start. Sessions the store has are not touched.
func (a *Admin) RestoreCold(ctx context.Context) (*RestoreColdReport, error) {
	r, ok := a.Cold.(memory.ColdRestorer)
	if a.Cold == nil || !ok {
		return nil, memory.Errorf(memory.EUNAVAILABLE, "the cold mirror cannot be read back")
	}
	files, err := a.Cold.MirrorSessions()
	if err != nil {
		return nil, fmt.Errorf("list cold mirror: %w", err)
	}
	rep := &RestoreColdReport{}
	p := a.progress()
	p.Begin("restoring cold sessions", len(files))
	defer p.End()
	for _, f := range files {
		p.Add(1)
		if _, err := a.Store.Session(ctx, f.Tenant, f.ID); err == nil {
			rep.Kept++
			continue
		} else if memory.ErrorCode(err) != memory.ENOTFOUND {
			return rep, fmt.Errorf("read session %s: %w", f.ID, err)
		}
		msgs, err := r.MirrorMessages(f.Tenant, f.ID)
		if err != nil {
			return rep, fmt.Errorf("read cold mirror of %s: %w", f.ID, err)
		}
		if len(msgs) == 0 {
			continue
		}
		if err := a.embed(ctx, msgs, nil); err != nil {
			return rep, err
		}
		if err := a.recordModelOnce(ctx); err != nil {
			return rep, err
		}
		for i, m := range msgs {
			m.Seq = uint64(i + 1)
		}
		now := a.now().UTC()
		sess := &memory.Session{Tenant: f.Tenant, ID: f.ID, ContextWindow: memory.DefaultDefaults.ContextWindow,
			Encoding: memory.DefaultDefaults.Encoding, CreatedAt: msgs[0].CreatedAt, UpdatedAt: now}
		if _, err := a.Store.Import(ctx, sess, msgs); err != nil {
			return rep, fmt.Errorf("import cold originals of %s: %w", f.ID, err)
		}
		rep.Sessions++
		rep.Messages += len(msgs)
		a.logger().Info("restored cold originals from the mirror", "tenant", f.Tenant, "session", f.ID, "messages", len(msgs))
	}
	return rep, nil
}

// recordModelOnce records the embedder's model in a store that has none
// (a lost store's replacement), so the server accepts the new vectors.
func (a *Admin) recordModelOnce(ctx context.Context) error {
	model, _, err := a.Model(ctx)
	if err != nil || model != "" {
		return err
	}
	return a.recordModel(ctx, a.emb)
}
