package index

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// One small real index per fuzz process: two tenants, three sessions, every
// state, times from 1970 to 2262 (and a year-1 and a year-9999 message,
// whose times Bleve cannot index).
var fuzzIndex struct {
	once sync.Once
	dir  string
	x    *Index
	err  error
}

// closeFuzzIndex runs from TestMain.
func closeFuzzIndex() {
	if fuzzIndex.x != nil {
		_ = fuzzIndex.x.Close()
	}
	if fuzzIndex.dir != "" {
		_ = os.RemoveAll(fuzzIndex.dir)
	}
}

func fuzzIdx(tb testing.TB) *Index {
	tb.Helper()
	fuzzIndex.once.Do(func() {
		dir, err := os.MkdirTemp("", "ctxd-index-fuzz-")
		if err != nil {
			fuzzIndex.err = err
			return
		}
		fuzzIndex.dir = dir
		msgs := newCorpus(7).messages("t", 200, 3, testDim, time.Unix(0, 0).UTC())
		for i, m := range msgs {
			m.CreatedAt = m.CreatedAt.Add(time.Duration(i) * 500 * 24 * time.Hour)
			if i%50 == 0 {
				m.Name = "alice"
			}
		}
		msgs[198].CreatedAt = time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)
		msgs[199].CreatedAt = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
		msgs = append(msgs, msg("u", "s000", "other-tenant", "the comet belongs to another tenant", 1))
		x, err := Open(filepath.Join(dir, "idx"), Options{Texts: textsOf(msgs)})
		if err != nil {
			fuzzIndex.err = err
			return
		}
		fuzzIndex.err = x.Apply(context.Background(), memory.IndexBatch{Upserts: msgs})
		fuzzIndex.x = x
	})
	if fuzzIndex.err != nil {
		tb.Fatal(fuzzIndex.err)
	}
	return fuzzIndex.x
}

// Any query text and filters: no panic, and no error but a clear
// invalid-request one; hits stay in the tenant, sessions, states and times
// asked for, at most k of them.
func FuzzSearch(f *testing.F) {
	for _, q := range []string{"", " ", "comet", "alice", "the of and", `+text:/.*/ -state:active "unterminated`, "*", "?",
		"a~2", "title:x^5", "\x00", "\xff\xfe", "😀", "May 2023 Sunday afternoon", strings.Repeat("ka", 2000),
		strings.Repeat("x ", 3000), "<|endoftext|>", "AND OR NOT", "[1 TO 5]", "{!lucene}x"} {
		f.Add(q, "s001", "active", int64(0), int64(0), uint8(0), 10, true)
	}
	f.Add("comet", "", "", int64(-62135596800+86400), int64(253402214400), uint8(1), 5, false) // year 1 .. 9999
	f.Add("comet", "s000", "dropped", int64(253402214400), int64(0), uint8(2), 1000, true)     // since year 9999
	f.Add("ka", "s002", "bogus", int64(1<<62), int64(-1<<62), uint8(3), -1, false)             // until before since
	f.Add("", "s002\x00", "recovered", int64(86400*365*300), int64(86400*365*301), uint8(2), 0, true)
	f.Fuzz(func(t *testing.T, text, session, state string, since, until int64, mode uint8, k int, highlight bool) {
		x := fuzzIdx(t)
		q := memory.SearchQuery{Tenant: "t", Text: text, K: k, Highlight: highlight,
			Mode: []string{memory.ModeHybrid, memory.ModeText, memory.ModeVector, "", "bogus"}[int(mode)%5]}
		if session != "" {
			q.Sessions = []string{session}
		}
		if state != "" {
			q.States = []memory.State{memory.State(state)}
		}
		if since != 0 {
			q.Since = time.Unix(since, 0)
		}
		if until != 0 {
			q.Until = time.Unix(until, 0)
		}
		if mode%3 != 1 {
			q.Vector = hashVec(text, testDim)
		}
		hits, err := x.Search(context.Background(), q)
		if err != nil {
			if memory.ErrorCode(err) != memory.EINVALID {
				t.Fatalf("search %+v: %v", q, err)
			}
			return
		}
		want := k
		if want <= 0 {
			want = DefaultK
		}
		if len(hits) > min(want, MaxK) {
			t.Fatalf("%d hits for k=%d", len(hits), k)
		}
		for _, h := range hits {
			if h.ID == "other-tenant" {
				t.Fatalf("search of tenant t found %s", h.ID)
			}
			if session != "" && h.SessionID != session {
				t.Fatalf("hit %s of session %q, asked for %q", h.ID, h.SessionID, session)
			}
		}
	})
}
