// Package coldstore keeps the inspectable copy of cold storage: one file
// per session, dir/<tenant>/<session>.jsonl.gz, JSONL in gzip segments
// (segment.go), one line per message that was dropped or summarized away.
//
// The bbolt store is the system of record; these files are for people
// (zcat, zgrep, jq) and for exports. They can be rebuilt from the store, and `verify`
// compares the two and repairs these files.
package coldstore

import (
	"maps"
	"time"

	"github.com/ctxd/ctxd/internal/clip"
	"github.com/ctxd/ctxd/memory"
)

// Chunk is one cold message as written to a session's file.
type Chunk struct {
	ChunkID          string         `json:"chunk_id"` // the message id
	SessionID        string         `json:"session_id"`
	Tenant           string         `json:"tenant"`
	Timestamp        time.Time      `json:"timestamp"` // when the message was written, not dropped
	Content          string         `json:"content"`
	Tokens           int            `json:"tokens"`
	Role             memory.Role    `json:"role"`
	Name             string         `json:"name,omitempty"`
	DropReason       string         `json:"drop_reason"`
	RelevanceScore   float64        `json:"relevance_score"`
	Threshold        float64        `json:"threshold"`
	PromptAtDrop     string         `json:"prompt_at_drop"` // its first maxLinePrompt bytes
	RecoverableUntil time.Time      `json:"recoverable_until"`
	DroppedAt        time.Time      `json:"dropped_at"`
	SummaryID        string         `json:"summary_id,omitempty"`
	VersionOf        string         `json:"version_of,omitempty"` // an edited message's earlier version: the message's id
	Metadata         map[string]any `json:"metadata,omitempty"`
}

// maxLinePrompt bounds the prompt a line quotes. The store keeps up to
// 2,000 characters of it with each cold message, the same for every message
// one compaction moved; quoted whole, it was half of the mirror (6.8 of
// 13.9 MB on 10 replayed coding-agent runs, for 1.6 MB of cold content).
// Its start says which prompt it was (as in the event logs); the API and
// the store have the rest.
const maxLinePrompt = 160

// ChunkOf is the chunk of a message that has gone cold. m.Cold should be
// set; if it is not, the cold fields are left zero rather than panicking in
// the middle of a compaction (a zero RecoverableUntil never expires).
// Metadata is copied so the chunk does not share a map with the message.
func ChunkOf(m *memory.Message) Chunk {
	c := Chunk{
		ChunkID:   m.ID,
		SessionID: m.SessionID,
		Tenant:    m.Tenant,
		Timestamp: m.CreatedAt,
		Content:   m.Content,
		Tokens:    m.Tokens,
		Role:      m.Role,
		Name:      m.Name,
		Metadata:  maps.Clone(m.Metadata),
		VersionOf: m.VersionOf,
	}
	if ci := m.Cold; ci != nil {
		c.DropReason = ci.DropReason
		c.RelevanceScore = ci.RelevanceScore
		c.Threshold = ci.Threshold
		c.PromptAtDrop = clip.String(ci.PromptAtDrop, maxLinePrompt)
		c.RecoverableUntil = ci.RecoverableUntil
		c.DroppedAt = ci.DroppedAt
		c.SummaryID = ci.SummaryID
	}
	return c
}

// Expired reports whether c can no longer be recovered at now. A chunk is
// recoverable up to and including RecoverableUntil; a zero RecoverableUntil
// means no deadline.
func Expired(c Chunk, now time.Time) bool {
	return !c.RecoverableUntil.IsZero() && now.After(c.RecoverableUntil)
}

// Purge splits chunks into those still recoverable at now and those that
// expired, each in the order given. It does not touch its argument.
func Purge(chunks []Chunk, now time.Time) (keep, purged []Chunk) {
	for _, c := range chunks {
		if Expired(c, now) {
			purged = append(purged, c)
		} else {
			keep = append(keep, c)
		}
	}
	return keep, purged
}
