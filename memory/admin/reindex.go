package admin

import (
	"context"
	"fmt"

	"github.com/ctxd/ctxd/memory"
)

// ReindexReport says what a reindex did.
type ReindexReport struct {
	Messages    int `json:"messages"`
	Reembedded  int `json:"reembedded"`
	Rerecorded  int `json:"vectors_rerecorded"`
	IndexedDocs int `json:"indexed"`
}

// Reindex gives every message a vector of the data dir's model (embedding
// those that lack one or have the wrong length) and rebuilds the full-text
// index from the store. Index should be empty (the old one removed): the
// rebuild writes every message but deletes nothing.
func (a *Admin) Reindex(ctx context.Context) (*ReindexReport, error) {
	sc, err := a.scanStore(ctx)
	if err != nil {
		return nil, err
	}
	vr := &VerifyReport{}
	if err := a.verifyVectors(ctx, sc, vr); err != nil {
		return nil, err
	}
	byKind := map[string][]Finding{}
	for _, f := range vr.Findings {
		byKind[f.Kind] = append(byKind[f.Kind], f)
	}
	if err := a.repairVectors(ctx, byKind); err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	rep := &ReindexReport{Messages: len(sc.msgs), Reembedded: len(byKind[FindVectorMissing]) + len(byKind[FindVectorDim]),
		Rerecorded: len(byKind[FindVectorStale])}
	last, err := a.Store.LastSeq(ctx)
	if err != nil {
		return nil, fmt.Errorf("read store seq: %w", err)
	}
	p := a.progress()
	p.Begin("indexing", len(sc.msgs))
	rep.IndexedDocs, err = memory.RebuildIndex(ctx, a.Store, a.Index, a.indexLog(), last, p.Add)
	p.End()
	if err != nil {
		return nil, err
	}
	return rep, nil
}
