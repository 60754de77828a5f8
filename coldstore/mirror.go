package coldstore

import "github.com/ctxd/ctxd/memory"

// Mirror adapts a Store to memory.ColdMirror, which speaks in messages.
type Mirror struct{ Store *Store }

var _ memory.ColdMirror = Mirror{}

// Append appends the chunks of msgs; see Store.Append.
func (m Mirror) Append(tenant, session string, msgs []*memory.Message) error {
	return m.Store.Append(tenant, session, chunksOf(msgs))
}

// Rewrite replaces the session's chunks with those of msgs; see Store.Rewrite.
func (m Mirror) Rewrite(tenant, session string, msgs []*memory.Message) error {
	return m.Store.Rewrite(tenant, session, chunksOf(msgs))
}

// Remove deletes the session's file; see Store.Remove.
func (m Mirror) Remove(tenant, session string) error { return m.Store.Remove(tenant, session) }

func chunksOf(msgs []*memory.Message) []Chunk {
	out := make([]Chunk, len(msgs))
	for i, msg := range msgs {
		out[i] = ChunkOf(msg)
	}
	return out
}
