package memory

// The ports: every interface the domain defines and an adapter implements
// (the stores, the index, the embedder, the tokenizer, the summarizer, the
// event log, the cold mirror, the idempotency keys, and the admin verbs'
// progress and audits), in one file. Adapters live beside the domain
// (memory/boltstore, memory/pgstore) or in packages of their own (index/,
// tokenizer/, summarize/, eventlog/, coldstore/); internal/server wires them.

import (
	"context"
	"errors"
	"time"
)

// Store is the system of record for sessions and messages. Every write is
// durable (on disk, fsynced) when the method returns nil, and atomic: all of
// it or none. Every write also appends to a change log, numbered by a
// store-wide sequence, that the indexes follow (see Change).
type Store interface {
	// Session returns one session; ENOTFOUND if it does not exist.
	Session(ctx context.Context, tenant, id string) (*Session, error)
	// Sessions lists a tenant's sessions ordered by id, those after the id
	// `after`, at most limit of them.
	Sessions(ctx context.Context, tenant, after string, limit int) ([]*Session, error)
	// Tenants lists every tenant that has a session.
	Tenants(ctx context.Context) ([]string, error)
	// UpdateSession creates the session with create() if it is missing, then
	// calls update on it (which may return an *Error to refuse), and saves it.
	UpdateSession(ctx context.Context, tenant, id string, create func() *Session, update func(*Session) error) (*Session, error)
	// DeleteSession removes a session and all its messages; ENOTFOUND if missing.
	DeleteSession(ctx context.Context, tenant, id string) error

	// Append stores msgs at the end of the session (creating it with create()
	// if it is missing), assigns each a Seq, and updates the session's counts
	// and tokens. Messages carry their ID, Tokens, State and Vector already.
	Append(ctx context.Context, tenant, id string, create func() *Session, msgs []*Message) (*Session, error)
	// Update runs fn in one write transaction on a session; ENOTFOUND if
	// the session does not exist. An error from fn rolls everything back.
	Update(ctx context.Context, tenant, sessionID string, fn func(SessionTx) error) (*Session, error)
	// Write is Update for a write of new messages: the session is created
	// with create() when it is missing (and saved only if fn succeeds), and
	// like Append it refuses (EUNAVAILABLE) while the disk is nearly full.
	Write(ctx context.Context, tenant, sessionID string, create func() *Session, fn func(SessionTx) error) (*Session, error)
	// Messages lists a session's messages in order, filtered by q.
	Messages(ctx context.Context, tenant, sessionID string, q MessageQuery) ([]*Message, error)
	// MessagesByID returns the messages with these ids that exist and belong
	// to tenant, in the order asked; withVectors loads their embeddings too.
	MessagesByID(ctx context.Context, tenant string, ids []string, withVectors bool) ([]*Message, error)

	// Changes returns up to limit change-log entries with Seq > after, in order.
	Changes(ctx context.Context, after uint64, limit int) ([]Change, error)
	// LastSeq is the Seq of the newest change-log entry.
	LastSeq(ctx context.Context) (uint64, error)
	// TrimChanges forgets change-log entries with Seq <= upTo (the indexes
	// have them).
	TrimChanges(ctx context.Context, upTo uint64) error
	// ForEachVector calls fn for every message that has a vector, with the
	// fields an index needs (not the content).
	// A damaged vector record is skipped and given to damaged (when not nil).
	ForEachVector(ctx context.Context, fn func(*Message) error, damaged func(*DamagedRecord)) error
	// ReplaceVectors stores new vectors for messages by id (used when the
	// embedding model changes).
	ReplaceVectors(ctx context.Context, vectors map[string][]float32) error
	// ForEachMessage calls fn for every message of every tenant, in store order.
	ForEachMessage(ctx context.Context, fn func(*Message) error) error
	// Import writes a session and its messages exactly as given (ids, seqs,
	// turns, states, cold info, vectors, timestamps), to restore an export,
	// in one transaction. The session's counters (counts, tokens, summaries,
	// prunable) are recomputed from the messages. ECONFLICT if the session or
	// any message id exists already; EINVALID for messages of another
	// session or repeated seqs. Every message is logged as an upsert.
	Import(ctx context.Context, sess *Session, msgs []*Message) (*Session, error)

	// WriteKeys reads what the store remembers of earlier writes
	// (idempotency keys, client message ids).
	WriteKeys

	// Meta reads a store-wide setting ("" if unset); SetMeta writes one.
	Meta(ctx context.Context, key string) (string, error)
	SetMeta(ctx context.Context, key, value string) error

	// View calls fn with a read-only snapshot: every read through it sees
	// the store as of one instant, while writers go on committing. The
	// online export needs it: read session by session, a session's counts
	// could come from before a write and its messages from after. Hold it
	// briefly where possible: the store cannot reuse the pages that writes
	// free while a snapshot is open, so its file grows.
	View(ctx context.Context, fn func(Snapshot) error) error

	Close() error
}

// Snapshot reads the store as of one instant (see Store.View). The snapshot
// must not be used after fn returns; the values it returns are copies and
// may be kept.
type Snapshot interface {
	// Session returns one session; ENOTFOUND if it does not exist.
	Session(tenant, id string) (*Session, error)
	// ForEachSession calls fn for each session of tenant ("": of every
	// tenant), ordered by tenant then id.
	ForEachSession(tenant string, fn func(*Session) error) error
	// Messages lists a session's messages in order, filtered by q.
	Messages(tenant, sessionID string, q MessageQuery) ([]*Message, error)
	// Meta reads a store-wide setting ("" if unset).
	Meta(key string) (string, error)
}

// MessageQuery filters and pages a session's messages.
type MessageQuery struct {
	States   []State // empty: all states
	AfterSeq uint64  // only messages with Seq > AfterSeq
	Limit    int     // 0: no limit
	// Desc lists newest first; BeforeSeq then bounds the page: only
	// messages with Seq < BeforeSeq (0: none). AfterSeq still applies.
	Desc      bool
	BeforeSeq uint64
	// Vectors loads each message's embedding too (Message.Vector).
	Vectors bool
}

// Matches reports whether m passes the state filter.
func (q MessageQuery) Matches(m *Message) bool {
	if len(q.States) == 0 {
		return true
	}
	for _, s := range q.States {
		if m.State == s {
			return true
		}
	}
	return false
}

// ChangeOp says what happened to the indexed data.
type ChangeOp string

const (
	ChangeUpsert        ChangeOp = "upsert"         // a message was written or its state changed
	ChangeDelete        ChangeOp = "delete"         // a message was removed
	ChangeDeleteSession ChangeOp = "delete_session" // a session and all its messages were removed
)

// Change is one entry of the store's change log.
type Change struct {
	Seq       uint64   `json:"seq"`
	Op        ChangeOp `json:"op"`
	Tenant    string   `json:"tenant"`
	SessionID string   `json:"session_id"`
	MessageID string   `json:"message_id,omitempty"`
}

// Index is the searchable copy of the store: full text and vectors. It is
// derived data: everything in it can be rebuilt from the Store.
type Index interface {
	// Apply makes the index reflect a batch of changes, and records watermark
	// (the Seq of the last change in the batch) atomically with it.
	Apply(ctx context.Context, b IndexBatch) error
	// LoadVectors puts vectors into the vector side only: at start-up the
	// in-memory vector side is filled from the store, the text side is on disk.
	LoadVectors(ctx context.Context, msgs []*Message) error
	// Watermark is the Seq of the last change the index holds durably.
	Watermark() (uint64, error)
	// Search returns the best hits for q, best first.
	Search(ctx context.Context, q SearchQuery) ([]Hit, error)
	// Count returns how many documents the text and vector sides hold.
	Count() (text, vector uint64, err error)
	Close() error
}

// VectorLoader is an Index whose vector side loads while it serves: between
// BeginVectorLoad and EndVectorLoad, LoadVectors gives way to what Apply
// writes meanwhile, and searches that need vectors wait for the end. A load
// that failed (EndVectorLoad with an error) fails those searches.
type VectorLoader interface {
	BeginVectorLoad()
	EndVectorLoad(err error)
}

// IndexBatch is a set of index updates.
type IndexBatch struct {
	Upserts        []*Message // with Vector set
	Deletes        []*Message // only Tenant, SessionID and ID are needed
	DeleteSessions []SessionRef
	Watermark      uint64
}

// SessionRef names a session.
type SessionRef struct{ Tenant, ID string }

// Search modes.
const (
	ModeHybrid = "hybrid"
	ModeText   = "text"
	ModeVector = "vector"
)

// SearchQuery is what the indexes are asked. Text drives the full-text side,
// Vector (the embedded Text) the vector side.
type SearchQuery struct {
	Tenant   string
	Text     string
	Vector   []float32
	Sessions []string // empty: every session of the tenant
	States   []State  // empty: every state
	IDs      []string // empty: any document; else only these
	// NoSummaries leaves out the server's summaries: only messages clients
	// wrote can match.
	NoSummaries bool
	// Expand matches the query words' neighbours in meaning too, when the
	// index has an expander (hybrid mode only).
	Expand bool
	// Feedback are the texts of the best first results of the same query,
	// best first (pseudo-relevance feedback): the index matches their most
	// distinctive words too; hybrid mode only.
	Feedback []string
	// Candidates is how many documents each side ranks before fusion, at
	// least K and at most the index's MaxK; 0 leaves it to the index.
	Candidates int
	Since      time.Time
	Until      time.Time
	K          int
	Mode       string
	Highlight  bool
}

// Hit is one search result from the index, before the store fills it in.
type Hit struct {
	ID          string
	SessionID   string
	Score       float64 // fused, in [0,1] for hybrid
	TextScore   float64 // normalised full-text component
	VectorScore float64 // cosine similarity component
	Highlight   string
	// Feedback are the feedback terms (SearchQuery.Feedback) the hit's
	// text has, analysed (stemmed); only with Highlight.
	Feedback []string
}

// Embedder turns texts into vectors of a fixed dimension.
type Embedder interface {
	// Model names the model; vectors of different models never mix.
	Model() string
	// Dim is the length of every vector.
	Dim() int
	// Embed returns one L2-normalised vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Tokenizer counts tokens exactly in a named encoding.
type Tokenizer interface {
	Count(encoding, text string) (int, error)
}

// SessionTx is one atomic write on one session: compaction, recovery and
// purge change many messages at once, and a crash must leave the session as
// before or as after. Counts and tokens of the session follow every change.
type SessionTx interface {
	// Session is the session as of this transaction; changes to its
	// settings fields are saved at commit.
	Session() *Session
	// Message returns one of the session's messages; ENOTFOUND if missing.
	Message(id string) (*Message, error)
	// Messages lists the session's messages in order, filtered by q.
	Messages(q MessageQuery) ([]*Message, error)
	// Put saves a changed message (same id and seq).
	Put(m *Message) error
	// Append adds a new message at the end of the session (assigning Seq).
	Append(m *Message) error
	// Delete removes a message for good (the TTL purge, DELETE).
	Delete(id string) error
	// WriteKeysTx reads and records idempotency keys, and finds client
	// message ids, in this transaction.
	WriteKeysTx
}

// DamageScanner is a Store that can read past damaged records: verify and
// the index rebuild use it, when the store has it, so one damaged record is
// reported instead of stopping them.
type DamageScanner interface {
	// ScanMessages is ForEachMessage that hands each damaged record to
	// damaged instead of failing, and goes on.
	ScanMessages(ctx context.Context, fn func(*Message) error, damaged func(*DamagedRecord)) error
}

// StoreChecker is a Store that can check its own file's structure.
type StoreChecker interface {
	// Check returns the problems of the store's file, nil if none.
	Check() error
}

// Progress hears how far long work has got; Admin works without one.
type Progress interface {
	// Begin starts a stage; total <= 0 means unknown.
	Begin(what string, total int)
	Add(n int)
	End()
}

// IndexDoc is what the full-text index holds of one message.
type IndexDoc struct {
	ID, Tenant, SessionID string
	State                 State
}

// MirrorFile is a session's cold mirror as read back.
type MirrorFile struct {
	Lines     []MirrorLine
	TornBytes int   // a last line without a newline (a cut write)
	BadLines  []int // 1-based numbers of complete lines that do not parse
	// BadSegments counts the runs of a compressed file that do not read
	// back (a checksum that fails, bytes that are no segment), BadBytes
	// their length: the lines in them are lost from the file.
	BadSegments, BadBytes int
}

// MirrorLine is one readable line of a mirror file.
type MirrorLine struct{ ID, Fingerprint string }

// ErrIndexNoAccess marks an index ctxd may not read or write (permissions,
// a read-only file system): verify reports it as such rather than as
// damage, and nothing rebuilds it (that would fail the same way, or throw a
// good index away).
var ErrIndexNoAccess = errors.New("index is not accessible (not damaged)")

// DocLister lists the documents of the full-text index.
type DocLister interface {
	ForEachDoc(ctx context.Context, fn func(IndexDoc) error) error
}

// ColdAuditor is a cold mirror that can be read back, so verify can compare
// it with the store without knowing its file format.
type ColdAuditor interface {
	ColdMirror
	// MirrorSessions lists the sessions that have a mirror file.
	MirrorSessions() ([]SessionRef, error)
	// ReadMirror returns a session's lines in file order, with any damage.
	ReadMirror(tenant, sessionID string) (MirrorFile, error)
	// Fingerprint is what the line of m must keep true (the message and its
	// retention; not how it went cold, which a line tells as of the first
	// time), in a form comparable with MirrorLine.Fingerprint.
	Fingerprint(m *Message) (string, error)
}

// Summarizer condenses a contiguous run of messages into one text.
type Summarizer interface {
	// Summarize returns a summary of req.Messages that fits req.TargetTokens
	// (exact count in req.Encoding). It must not fail for want of a network:
	// implementations fall back and say so in Summary.Method and Note.
	Summarize(ctx context.Context, req SummaryRequest) (Summary, error)
}

// EventLog records what the server did, as JSONL streams under logs/.
type EventLog interface {
	// Log appends one event to the named stream ("compaction", "drops",
	// "recoveries", "context-health"). Events carry their own fields; the
	// log adds the time.
	Log(stream string, event map[string]any) error
}

// ColdMirror keeps an inspectable copy of cold chunks (JSONL per session):
// a line for every original that went cold since the last purge, written
// when it first did (dropped again after a recovery, or released by a
// rolled summary, it keeps that line; if a file holds two lines of an id,
// the last is current). The store is the truth; the mirror can be rebuilt
// from it, and start-up and verify compare the two.
type ColdMirror interface {
	// Append adds chunks durably (fsynced) before returning.
	Append(tenant, sessionID string, msgs []*Message) error
	// Rewrite replaces a session's chunks atomically.
	Rewrite(tenant, sessionID string, msgs []*Message) error
	// Remove forgets a session.
	Remove(tenant, sessionID string) error
}

// EventReader reads back the event log (the eventlog package implements it).
type EventReader interface {
	// Tail returns the last n events of a stream for which filter is true,
	// oldest first.
	Tail(stream string, n int, filter func(map[string]any) bool) ([]map[string]any, error)
}

// WriteKeys reads what the store remembers of a session's earlier writes,
// outside a transaction: a retry is recognised before its messages are
// counted and embedded again.
type WriteKeys interface {
	// WriteKey returns the record of the session's write with this
	// idempotency key; nil when none is kept.
	WriteKey(ctx context.Context, tenant, sessionID, key string) (*WriteRecord, error)
	// MessagesByClientID returns the session's messages that carry these
	// client ids, by client id; ids not stored are left out.
	MessagesByClientID(ctx context.Context, tenant, sessionID string, clientIDs []string) (map[string]*Message, error)
}

// WriteKeysTx is WriteKeys inside a session transaction, where the write
// that records a key is decided.
type WriteKeysTx interface {
	// WriteKey returns the record of this session's write with key; nil
	// when none is kept.
	WriteKey(key string) (*WriteRecord, error)
	// PutWriteKey records rec (replacing a record of the same key), then
	// forgets the session's records made before expireBefore and all but
	// the newest keep.
	PutWriteKey(rec *WriteRecord, expireBefore time.Time, keep int) error
	// MessageByClientID returns the session's message with this client id;
	// nil when there is none.
	MessageByClientID(clientID string) (*Message, error)
}

// ColdRestorer is a cold mirror that can give back the messages it holds.
type ColdRestorer interface {
	// MirrorMessages reads a session's mirror as messages in a cold state,
	// in order, without vectors.
	MirrorMessages(tenant, sessionID string) ([]*Message, error)
}

// SessionLocker is a store that several processes share (PostgreSQL): it
// serializes work on one session across them, for as long as the caller
// holds the lock. The gateway takes it around each of its calls on a
// session (matching the resent history and storing what is new); the store's
// own writes already take turns on the session within their transaction.
type SessionLocker interface {
	// LockSession returns once the caller holds the session's lock, with
	// the func that releases it; EUNAVAILABLE when the wait runs too long.
	LockSession(ctx context.Context, tenant, id string) (unlock func(), err error)
}

// LayoutStore is a shared store that keeps each session's last window
// layout (window_shared.go), so that whichever node builds a session's next
// window extends the same one. The layout is opaque to the store.
type LayoutStore interface {
	// Layout is the session's stored layout; nil and no error when none.
	Layout(ctx context.Context, tenant, session string) ([]byte, error)
	PutLayout(ctx context.Context, tenant, session string, layout []byte) error
}
