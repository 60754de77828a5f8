package coldstore

import (
	"errors"

	"github.com/ctxd/ctxd/memory"
)

var _ memory.ColdRestorer = Mirror{}

// MirrorMessages reads a session's file back as the cold messages it
// mirrors, in file order, the last line of an id winning: what `ctxd
// restore-cold` imports when the store lost them. Damaged lines are left
// out; the good ones still come back. Fields a line does not keep come back
// empty: the prompt at drop is cut to its first maxLinePrompt bytes, and
// the vector is made again by the caller.
func (m Mirror) MirrorMessages(tenant, session string) ([]*memory.Message, error) {
	chunks, err := m.Store.Read(tenant, session)
	var dmg *DamageError
	if err != nil && !errors.As(err, &dmg) {
		return nil, err
	}
	at := map[string]int{}
	var out []*memory.Message
	for _, c := range chunks {
		msg := messageOf(c)
		if i, ok := at[c.ChunkID]; ok {
			out[i] = msg
			continue
		}
		at[c.ChunkID] = len(out)
		out = append(out, msg)
	}
	return out, nil
}

// messageOf is the cold message a chunk was written from (ChunkOf's inverse
// for what the line keeps).
func messageOf(c Chunk) *memory.Message {
	m := &memory.Message{
		ID: c.ChunkID, SessionID: c.SessionID, Tenant: c.Tenant, CreatedAt: c.Timestamp,
		Content: c.Content, Tokens: c.Tokens, Role: c.Role, Name: c.Name, Metadata: c.Metadata,
		VersionOf: c.VersionOf, State: memory.StateDropped,
		Cold: &memory.ColdInfo{DropReason: c.DropReason, RelevanceScore: c.RelevanceScore, Threshold: c.Threshold,
			PromptAtDrop: c.PromptAtDrop, DroppedAt: c.DroppedAt, RecoverableUntil: c.RecoverableUntil, SummaryID: c.SummaryID},
	}
	if c.SummaryID != "" || c.DropReason == memory.ReasonSummarized {
		m.State = memory.StateSummarized
	}
	if c.VersionOf != "" {
		m.Kind = memory.KindVersion
	}
	return m
}
