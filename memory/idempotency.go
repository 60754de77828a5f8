package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A write may carry an idempotency key (the Idempotency-Key header) and
// each message a client id (message_id), so an agent that retries a POST
// whose answer it lost stores nothing twice.
//
// Keys are kept in the store, in the write's own transaction (a crash
// cannot keep the messages and lose the key, or the other way round), per
// session, for WriteKeyTTL, and at most MaxWriteKeysPerSession of them: a
// retry comes within seconds or minutes, and a bound keeps a session that
// writes with a new key every turn from growing without end. Client ids
// live as long as their message.
const (
	WriteKeyTTL            = 24 * time.Hour
	MaxWriteKeysPerSession = 1000
	MaxIdempotencyKeyBytes = 255
)

// WriteRecord is what the store keeps of a write made with an idempotency
// key: enough to answer a retry exactly as the first write was answered.
type WriteRecord struct {
	Key string `json:"key"`
	// Hash identifies the messages as the client sent them: a key reused
	// for other messages is refused, not answered with the first write.
	Hash   string    `json:"hash"`
	IDs    []string  `json:"ids"`
	Tokens []int     `json:"tokens"`
	At     time.Time `json:"at"`
}

// AppendOptions are the optional parts of a write.
type AppendOptions struct {
	// IdempotencyKey names the write: a retry with the same key and
	// messages is answered as the first write was, and stores nothing.
	IdempotencyKey string
	// Untold: the write's answer reaches no agent (the gateway storing an
	// upstream's answer), so a flush prompt it carries is not recorded as
	// told: the session's next write tells it, and its compaction waits
	// for that. Recorded, the gateway's flush turn never ran when the
	// answer was what crossed the trigger (the 1,000-step session: none in
	// 249 compactions).
	Untold bool
}

// ValidateIdempotencyKey checks a key: 1 to MaxIdempotencyKeyBytes
// printable ASCII characters (it travels in an HTTP header).
func ValidateIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyBytes {
		return Errorf(EINVALID, "Idempotency-Key: use 1 to %d printable ASCII characters (a UUID is a good key), not %d bytes", MaxIdempotencyKeyBytes, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return Errorf(EINVALID, "Idempotency-Key: byte %d (0x%02x) is not printable ASCII", i, c)
		}
	}
	return nil
}

// checkClientIDs refuses a batch that names one client id twice: the
// second could only be skipped as a copy of the first, which the client
// cannot have meant.
func checkClientIDs(msgs []*Message) error {
	first := map[string]int{}
	for i, m := range msgs {
		if m.ClientID == "" {
			continue
		}
		if j, dup := first[m.ClientID]; dup {
			return Errorf(EINVALID, "messages[%d].message_id: %q is messages[%d]'s too; give each message its own", i, m.ClientID, j)
		}
		first[m.ClientID] = i
	}
	return nil
}

// sentForm is the part of a message the client wrote, for requestHash.
type sentForm struct {
	Role       Role           `json:"role"`
	Content    string         `json:"content"`
	Name       string         `json:"name"`
	ToolCallID string         `json:"tool_call_id"`
	ToolCalls  []ToolCall     `json:"tool_calls"`
	Important  bool           `json:"important"`
	Pinned     bool           `json:"pinned"`
	Metadata   map[string]any `json:"metadata"`
	CreatedAt  time.Time      `json:"created_at"`
	ClientID   string         `json:"message_id"`
}

// requestHash identifies a write's messages as sent (before the server
// fills in ids, times and tokens). encoding/json writes map keys sorted,
// so the same messages always hash alike.
func requestHash(msgs []*Message) (string, error) {
	forms := make([]sentForm, len(msgs))
	for i, m := range msgs {
		forms[i] = sentForm{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls,
			Important: m.Important, Pinned: m.Pinned, Metadata: m.Metadata, CreatedAt: m.CreatedAt, ClientID: m.ClientID}
	}
	b, err := json.Marshal(forms)
	if err != nil {
		return "", fmt.Errorf("hash request: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// liveRecord is rec when it is still kept at now (a record past its TTL
// that was not yet pruned counts as gone).
func liveRecord(rec *WriteRecord, now time.Time) *WriteRecord {
	if rec == nil || rec.At.Before(now.Add(-WriteKeyTTL)) {
		return nil
	}
	return rec
}

// errReplay rolls back a write transaction that found its key recorded
// by a concurrent copy of the same write.
var errReplay = errors.New("write already recorded under its idempotency key")

// replay answers a retried write from its record: the first answer's ids
// and tokens, with the session as it is now.
func (s *Service) replay(ctx context.Context, tenant, sessionID string, rec *WriteRecord, hash string) (*AppendResult, error) {
	if rec.Hash != hash {
		return nil, Errorf(ECONFLICT, "Idempotency-Key %q was used at %s for another write to session %q (other messages); resend exactly the same messages to get that write's answer, or use a new key for a new write",
			rec.Key, rec.At.Format(time.RFC3339), sessionID)
	}
	sess, err := s.Store.Session(ctx, tenant, sessionID)
	if err != nil {
		return nil, err
	}
	return &AppendResult{IDs: rec.IDs, Tokens: rec.Tokens, Session: s.status(sess), Replayed: true}, nil
}
