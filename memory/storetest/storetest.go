// Package storetest is the contract every memory.Store keeps, as one suite
// a backend's own tests run (the Litestream way: one exported function, every
// backend): appends and their atomicity, idempotency keys and client ids,
// state moves and the session's counters, the change feed the indexer
// follows, tenant isolation, import and snapshot reads (the export's path),
// and damage reporting.
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, storetest.Backend{Open: func(t *testing.T) memory.Store { ... }})
//	}
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// Backend opens the store under test.
type Backend struct {
	// Open returns a new, empty store; the backend closes it in a cleanup.
	Open func(t *testing.T) memory.Store
	// Damage makes the stored record of message id unreadable, as disk
	// damage would; nil skips the damage rules.
	Damage func(t *testing.T, s memory.Store, tenant, session, id string)
}

// Run runs every rule of the contract against b, each as a subtest on a
// store of its own.
func Run(t *testing.T, b Backend) {
	rules := []struct {
		name string
		fn   func(*testing.T, memory.Store)
	}{
		{"AppendPlacesAndCounts", testAppend},
		{"AppendIsAtomic", testAppendAtomic},
		{"WriteRollsBack", testWriteRollsBack},
		{"UpdateSession", testUpdateSession},
		{"StateMovesKeepCounters", testStateMoves},
		{"DeleteMessage", testDeleteMessage},
		{"IdempotencyKeys", testIdempotencyKeys},
		{"ClientIDs", testClientIDs},
		{"ChangeFeed", testChangeFeed},
		{"ChangeFeedDeletes", testChangeFeedDeletes},
		{"TenantIsolation", testTenantIsolation},
		{"SessionsInIDOrder", testSessionsOrder},
		{"MessageQuery", testMessageQuery},
		{"Import", testImport},
		{"ImportRefuses", testImportRefuses},
		{"SnapshotReads", testSnapshot},
		{"Scans", testScans},
		{"ReplaceVectors", testReplaceVectors},
		{"Meta", testMeta},
		{"ConcurrentAppends", testConcurrentAppends},
		{"CancelledContext", testCancelled},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) { r.fn(t, b.Open(t)) })
	}
	t.Run("Damage", func(t *testing.T) {
		if b.Damage == nil {
			t.Skip("the backend cannot damage a record")
		}
		testDamage(t, b)
	})
}

// NewSession is the create func of a session with a 1,000-token window.
func NewSession(tenant, id string) func() *memory.Session {
	return func() *memory.Session {
		return &memory.Session{Tenant: tenant, ID: id, ContextWindow: 1000, Encoding: memory.EncodingO200k,
			CreatedAt: time.Unix(1000, 0).UTC(), UpdatedAt: time.Unix(1000, 0).UTC()}
	}
}

// Msgs returns n active user messages of 10 tokens with ids prefix-000...,
// each with a 2-d vector.
func Msgs(prefix string, n int) []*memory.Message {
	out := make([]*memory.Message, n)
	for i := range out {
		out[i] = &memory.Message{ID: fmt.Sprintf("%s-%03d", prefix, i), Role: memory.RoleUser,
			Content: fmt.Sprintf("message %d of %s", i, prefix), Tokens: 10, State: memory.StateActive,
			CreatedAt: time.Unix(int64(2000+i), 0).UTC(), Vector: []float32{float32(i + 1), 1}}
	}
	return out
}

var bg = context.Background()

func mustAppend(t *testing.T, s memory.Store, tenant, id string, msgs []*memory.Message) *memory.Session {
	t.Helper()
	sess, err := s.Append(bg, tenant, id, NewSession(tenant, id), msgs)
	if err != nil {
		t.Fatalf("append to %s/%s: %v", tenant, id, err)
	}
	return sess
}

func mustSession(t *testing.T, s memory.Store, tenant, id string) *memory.Session {
	t.Helper()
	sess, err := s.Session(bg, tenant, id)
	if err != nil {
		t.Fatalf("session %s/%s: %v", tenant, id, err)
	}
	return sess
}

func mustMessages(t *testing.T, s memory.Store, tenant, id string, q memory.MessageQuery) []*memory.Message {
	t.Helper()
	msgs, err := s.Messages(bg, tenant, id, q)
	if err != nil {
		t.Fatalf("messages of %s/%s: %v", tenant, id, err)
	}
	return msgs
}

func ids(msgs []*memory.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := memory.ErrorCode(err); got != code {
		t.Fatalf("%s: error %v (code %q), want code %q", what, err, got, code)
	}
}

// sameVector compares vectors up to the int8 quantisation the stores may
// apply (a component moves by at most max|v|/254).
func sameVector(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	var mx float64
	for _, f := range a {
		mx = max(mx, math.Abs(float64(f)))
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > mx/200+1e-6 {
			return false
		}
	}
	return true
}

// checkCounters recounts a session from its messages and compares the
// stored totals: what verify checks, here after every rule.
func checkCounters(t *testing.T, s memory.Store, tenant, id string) {
	t.Helper()
	sess := mustSession(t, s, tenant, id)
	msgs := mustMessages(t, s, tenant, id, memory.MessageQuery{})
	want, err := memory.Imported(sess, msgs)
	if err != nil {
		t.Fatalf("recount %s/%s: %v", tenant, id, err)
	}
	if sess.PinnedTokens == nil {
		want.PinnedTokens = nil
	}
	if sess.Counts != want.Counts || sess.Tokens != want.Tokens || sess.Summaries != want.Summaries ||
		(sess.PinnedTokens != nil && *sess.PinnedTokens != *want.PinnedTokens) || len(sess.Prunable) != len(want.Prunable) {
		t.Fatalf("session %s/%s counters %v tokens %d summaries %d prunable %d; its messages say %v, %d, %d, %d",
			tenant, id, sess.Counts, sess.Tokens, sess.Summaries, len(sess.Prunable), want.Counts, want.Tokens, want.Summaries, len(want.Prunable))
	}
	if n := len(msgs); n > 0 && sess.LastSeq < msgs[n-1].Seq {
		t.Fatalf("session %s/%s last seq %d is behind its newest message's %d", tenant, id, sess.LastSeq, msgs[n-1].Seq)
	}
}

var errRefused = memory.Errorf(memory.ECONFLICT, "refused by the test")

func isRefused(err error) bool {
	return errors.Is(err, errRefused) || memory.ErrorCode(err) == memory.ECONFLICT
}
