package admin

import (
	"context"
	"fmt"

	"github.com/ctxd/ctxd/memory"
)

// Repair fixes what rep found from the store, the truth: vectors first
// (re-embedded or re-recorded, which logs changes), then the index (the
// change log replayed, then missing and stale documents written and extra
// ones deleted), then the cold mirror files (rewritten from the store).
// Verify again afterwards to see what remains.
func (a *Admin) Repair(ctx context.Context, rep *VerifyReport) error {
	byKind := map[string][]Finding{}
	for _, f := range rep.Findings {
		byKind[f.Kind] = append(byKind[f.Kind], f)
	}
	if err := a.repairCounts(ctx, byKind[FindSessionCounts]); err != nil {
		return fmt.Errorf("repair session counts: %w", err)
	}
	if err := a.repairVectors(ctx, byKind); err != nil {
		return fmt.Errorf("repair vectors: %w", err)
	}
	if a.Index != nil {
		if err := a.repairIndex(ctx, byKind); err != nil {
			return fmt.Errorf("repair index: %w", err)
		}
	}
	if a.Cold != nil {
		if err := a.repairCold(ctx, rep.Findings); err != nil {
			return fmt.Errorf("repair cold mirror: %w", err)
		}
	}
	return nil
}

// repairCounts recounts each session found with wrong counts from its
// messages, in the transaction that writes them.
func (a *Admin) repairCounts(ctx context.Context, found []Finding) error {
	for _, f := range found {
		msgs, err := a.Store.Messages(ctx, f.Tenant, f.SessionID, memory.MessageQuery{})
		if err != nil {
			return fmt.Errorf("session %s: %w", f.SessionID, err)
		}
		var c memory.Counts
		for _, m := range msgs {
			c.Add(m.State, 1)
		}
		if _, err := a.Store.Update(ctx, f.Tenant, f.SessionID, func(tx memory.SessionTx) error {
			tx.Session().Counts = c
			return nil
		}); err != nil {
			return fmt.Errorf("session %s: %w", f.SessionID, err)
		}
	}
	return nil
}

// load reads the messages the findings name, with their vectors.
func (a *Admin) load(ctx context.Context, fs ...[]Finding) ([]*memory.Message, error) {
	byTenant := map[string][]string{}
	var tenants []string
	for _, list := range fs {
		for _, f := range list {
			if f.MessageID == "" {
				continue
			}
			if byTenant[f.Tenant] == nil {
				tenants = append(tenants, f.Tenant)
			}
			byTenant[f.Tenant] = append(byTenant[f.Tenant], f.MessageID)
		}
	}
	var out []*memory.Message
	for _, t := range tenants {
		ids := byTenant[t]
		for start := 0; start < len(ids); start += memory.ChangeBatch {
			msgs, err := a.Store.MessagesByID(ctx, t, ids[start:min(start+memory.ChangeBatch, len(ids))], true)
			if err != nil {
				return nil, fmt.Errorf("read messages: %w", err)
			}
			out = append(out, msgs...)
		}
	}
	return out, nil
}

func (a *Admin) repairVectors(ctx context.Context, byKind map[string][]Finding) error {
	embed, err := a.load(ctx, byKind[FindVectorMissing], byKind[FindVectorDim])
	if err != nil {
		return err
	}
	p := a.progress()
	p.Begin("embedding", len(embed))
	err = a.embed(ctx, embed, func(v map[string][]float32) error { return a.Store.ReplaceVectors(ctx, v) })
	p.End()
	if err != nil {
		return err
	}
	stale, err := a.load(ctx, byKind[FindVectorStale])
	if err != nil {
		return err
	}
	// Writing the same vector again re-records the message's current state.
	vecs := make(map[string][]float32, len(stale))
	for _, m := range stale {
		vecs[m.ID] = m.Vector
	}
	if len(vecs) == 0 {
		return nil
	}
	return a.Store.ReplaceVectors(ctx, vecs)
}

func (a *Admin) repairIndex(ctx context.Context, byKind map[string][]Finding) error {
	if len(byKind[FindIndexAhead]) == 0 {
		// The replay the server does at start; it also covers every change
		// the vector repair just logged.
		if err := a.CatchUp(ctx); err != nil {
			return err
		}
	}
	last, err := a.Store.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("read store seq: %w", err)
	}
	upserts, err := a.load(ctx, byKind[FindIndexMissing], byKind[FindIndexStale])
	if err != nil {
		return err
	}
	var deletes []*memory.Message
	for _, f := range byKind[FindIndexExtra] {
		deletes = append(deletes, &memory.Message{ID: f.MessageID, Tenant: f.Tenant, SessionID: f.SessionID})
	}
	if len(upserts)+len(deletes) == 0 && len(byKind[FindIndexAhead]) == 0 {
		return nil
	}
	// An index ahead of the store is set back to the store's last change:
	// with the documents now matching the store, that is what it holds.
	for start := 0; start == 0 || start < len(upserts); start += memory.ChangeBatch {
		b := memory.IndexBatch{Upserts: upserts[start:min(start+memory.ChangeBatch, len(upserts))], Watermark: last}
		if start == 0 {
			b.Deletes = deletes
		}
		if err := a.Index.Apply(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// repairCold rewrites each session's mirror file named by a finding from the
// store's cold messages, and removes the files of sessions the store lacks,
// unless the store has no session at all: then it was lost, not emptied,
// and the mirror files are the last copy of the cold originals (`ctxd
// restore-cold` brings them back).
func (a *Admin) repairCold(ctx context.Context, findings []Finding) error {
	tenants, err := a.Store.Tenants(ctx)
	if err != nil {
		return fmt.Errorf("list tenants: %w", err)
	}
	keepOrphans := len(tenants) == 0
	done := map[sessionKey]bool{}
	for _, f := range findings {
		// A session with a damaged record keeps its mirror file as it is:
		// its lines may be the last good copy, and rewriting it would need
		// the record.
		if f.Kind == FindRecordDamaged {
			done[sessionKey{f.Tenant, f.SessionID}] = true
		}
	}
	for _, f := range findings {
		k := sessionKey{f.Tenant, f.SessionID}
		if done[k] {
			continue
		}
		switch f.Kind {
		case FindColdOrphan:
			if keepOrphans {
				a.logger().Warn("the store has no sessions: keeping the cold mirror file of a session it lacks (restore it with ctxd restore-cold)",
					"tenant", f.Tenant, "session", f.SessionID)
				continue
			}
			if err := a.Cold.Remove(f.Tenant, f.SessionID); err != nil {
				return err
			}
		case memory.FindColdMissing, memory.FindColdStale, memory.FindColdTorn, memory.FindColdBad:
			if err := a.rewriteCold(ctx, f.Tenant, f.SessionID); err != nil {
				return err
			}
		default:
			continue
		}
		done[k] = true
	}
	return nil
}

// rewriteCold makes a session's mirror list its messages in a cold state
// and its recovered originals (see Mirrored), as the server's
// rewriteColdMirror does after a purge.
func (a *Admin) rewriteCold(ctx context.Context, tenant, sessionID string) error {
	cold, err := a.Store.Messages(ctx, tenant, sessionID, memory.MessageQuery{States: memory.MirrorStates})
	if err != nil {
		return fmt.Errorf("read cold messages of %s: %w", sessionID, err)
	}
	if err := a.Cold.Rewrite(tenant, sessionID, memory.Mirrored(cold)); err != nil {
		return fmt.Errorf("rewrite cold mirror of %s: %w", sessionID, err)
	}
	return nil
}
