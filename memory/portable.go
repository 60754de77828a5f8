package memory

import (
	"time"
)

// The export format: JSON lines. The first line is a header; then each
// session's line is followed by its messages' lines, in seq order. The
// records reuse Session's and Message's JSON, so every stored field travels
// (ids, states, cold info, summaries' sources, pruning, metadata, seqs).
const (
	ExportFormat  = "ctxd-export"
	ExportVersion = 1
)

// Record types of an export line.
const (
	RecordHeader  = "header"
	RecordSession = "session"
	RecordMessage = "message"
)

// ExportHeader describes an export: its format and the model its vectors
// (if any) came from.
type ExportHeader struct {
	Format     string    `json:"format"`
	Version    int       `json:"version"`
	EmbedModel string    `json:"embed_model"`
	EmbedDim   int       `json:"embed_dim"`
	Vectors    bool      `json:"vectors"`
	ExportedAt time.Time `json:"exported_at"`
}

// ExportRecord is one line of an export.
type ExportRecord struct {
	Type    string        `json:"type"`
	Header  *ExportHeader `json:"header,omitempty"`
	Session *Session      `json:"session,omitempty"`
	Message *Message      `json:"message,omitempty"`
	// Vector is the message's embedding, with --vectors only.
	Vector []float32 `json:"vector,omitempty"`
}
