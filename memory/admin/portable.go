package admin

import (
	"time"

	"github.com/ctxd/ctxd/memory"
)

// The export format: JSON lines. The first line is a header; then each
// session's line is followed by its messages' lines, in seq order; the last
// line is a trailer. The records reuse Session's and Message's JSON, so
// every stored field travels (ids, states, cold info, summaries' sources,
// pruning, metadata, seqs).
//
// The trailer is how a reader tells a whole export from a cut one: a stream
// from GET /v1/export that fails half way has already answered 200, and a
// file cut at a line boundary parses as well as a whole one. A header with
// "trailer": true promises one; exports written before it have neither and
// are read as before.
const (
	ExportFormat  = "ctxd-export"
	ExportVersion = 1
)

// Record types of an export line.
const (
	RecordHeader  = "header"
	RecordSession = "session"
	RecordMessage = "message"
	RecordTrailer = "trailer"
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
	// Trailer says the export ends in a trailer record; a reader that
	// finds none has a cut export.
	Trailer bool `json:"trailer,omitempty"`
}

// ExportTrailer is the last line of an export. Complete is false when the
// writer failed after it began (Error says why); the counts are of the
// session and message records before it, for the reader to check.
type ExportTrailer struct {
	Complete bool   `json:"complete"`
	Sessions int    `json:"sessions"`
	Messages int    `json:"messages"`
	Error    string `json:"error,omitempty"`
}

// ExportRecord is one line of an export.
type ExportRecord struct {
	Type    string          `json:"type"`
	Header  *ExportHeader   `json:"header,omitempty"`
	Session *memory.Session `json:"session,omitempty"`
	Message *memory.Message `json:"message,omitempty"`
	Trailer *ExportTrailer  `json:"trailer,omitempty"`
	// Vector is the message's embedding, with --vectors only.
	Vector []float32 `json:"vector,omitempty"`
}
