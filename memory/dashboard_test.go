package memory_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

func TestContextPreviewChangesNothing(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t, memorytest.WithEvents(t))
	ctx := context.Background()
	h.Compacted(t, ctx, "s")
	before, err := h.GetSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if before.Messages.Dropped+before.Messages.Summarized == 0 {
		t.Fatalf("seed left nothing cold: %+v", before.Messages)
	}
	recoveries := func() int {
		ev, err := h.TailEvents(ctx, memory.EventQuery{Stream: "recoveries", N: memory.MaxEventCount})
		if err != nil {
			t.Fatal(err)
		}
		return len(ev)
	}
	req := memory.ContextRequest{Prompt: "what is the zebrafish password manager vault on?", Explain: true, Preview: true}
	prev, err := h.Context(ctx, "s", req)
	if err != nil {
		t.Fatal(err)
	}
	if len(prev.Recovered) == 0 {
		t.Fatalf("preview recovers nothing for a prompt about a cold turn; window %d messages", len(prev.Messages))
	}
	after, err := h.GetSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if after.Messages != before.Messages || after.Tokens != before.Tokens {
		t.Fatalf("preview changed the session: %+v %d -> %+v %d", before.Messages, before.Tokens, after.Messages, after.Tokens)
	}
	if n := recoveries(); n != 0 {
		t.Fatalf("preview logged %d recoveries", n)
	}
	for _, id := range prev.Recovered {
		m, err := h.Message(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if m.InWindow() {
			t.Fatalf("preview moved %s back: state %s", id, m.State)
		}
	}
	// The call itself recovers what the preview said it would.
	req.Preview = false
	real, err := h.Context(ctx, "s", req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(real.Recovered, prev.Recovered) {
		t.Fatalf("call recovered %v, preview said %v", real.Recovered, prev.Recovered)
	}
	if recoveries() == 0 {
		t.Fatal("the call logged no recovery")
	}
}

func TestQuerySessions(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := memory.NewContextWithTenant(context.Background(), "t1")
	// 23 sessions with 1..23 messages: tokens grow with the number.
	for i := 1; i <= 23; i++ {
		var msgs []*memory.Message
		for j := range i {
			msgs = append(msgs, &memory.Message{Role: memory.RoleUser, Content: fmt.Sprintf("note %d of session %d", j, i)})
		}
		h.Clock.Add(time.Second)
		if _, err := h.Append(ctx, fmt.Sprintf("sess-%02d", i), msgs); err != nil {
			t.Fatal(err)
		}
	}
	other := memory.NewContextWithTenant(context.Background(), "t2")
	if _, err := h.Append(other, "sess-99", userMsgs("another tenant's")); err != nil {
		t.Fatal(err)
	}
	all := func(q memory.SessionQuery) []string {
		t.Helper()
		var ids []string
		for pages := 0; ; pages++ {
			p, err := h.QuerySessions(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Sessions) > q.Limit {
				t.Fatalf("page of %d rows, limit %d", len(p.Sessions), q.Limit)
			}
			for _, st := range p.Sessions {
				ids = append(ids, st.ID)
			}
			if p.Next == "" {
				return ids
			}
			if pages > 30 {
				t.Fatal("pages never end")
			}
			q.Cursor = p.Next
		}
	}
	want := func(nums ...int) []string {
		var ids []string
		for _, n := range nums {
			ids = append(ids, fmt.Sprintf("sess-%02d", n))
		}
		return ids
	}
	var up, down []int
	for i := 1; i <= 23; i++ {
		up, down = append(up, i), append(down, 24-i)
	}
	cases := []struct {
		name string
		q    memory.SessionQuery
		want []string
	}{
		{"OK id", memory.SessionQuery{Limit: 5}, want(up...)},
		{"OK id desc", memory.SessionQuery{Desc: true, Limit: 4}, want(down...)},
		{"OK tokens desc", memory.SessionQuery{Sort: memory.SortTokens, Desc: true, Limit: 5}, want(down...)},
		{"OK updated", memory.SessionQuery{Sort: memory.SortUpdated, Limit: 7}, want(up...)},
		{"OK contains", memory.SessionQuery{Contains: "-1", Limit: 3}, want(10, 11, 12, 13, 14, 15, 16, 17, 18, 19)},
		{"OK contains sorted", memory.SessionQuery{Contains: "-2", Sort: memory.SortTokens, Desc: true, Limit: 2}, want(23, 22, 21, 20)},
		// Equal keys (nothing is cold anywhere) go by id.
		{"OK ties", memory.SessionQuery{Contains: "-0", Sort: memory.SortCold, Desc: true, Limit: 2}, want(1, 2, 3, 4, 5, 6, 7, 8, 9)},
		{"OK state none", memory.SessionQuery{States: []string{memory.WindowOverLimit}, Limit: 5}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := all(c.q); !slices.Equal(got, c.want) {
				t.Fatalf("got %v\nwant %v", got, c.want)
			}
		})
	}
	t.Run("OK matched", func(t *testing.T) {
		p, err := h.QuerySessions(ctx, memory.SessionQuery{Contains: "-2", Sort: memory.SortCold, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if p.Matched != 4 || len(p.Sessions) != 1 {
			t.Fatalf("matched %d, %d rows; want 4, 1", p.Matched, len(p.Sessions))
		}
	})
	for _, bad := range []memory.SessionQuery{
		{Sort: "colour"}, {States: []string{"asleep"}}, {Limit: -1},
		{Sort: memory.SortTokens, Cursor: "sess-01"}, {Sort: memory.SortTokens, Cursor: "pct_used:5:sess-01"},
		{Cursor: "../x"}, {Sort: memory.SortTokens, Cursor: "tokens:x:sess-01"},
	} {
		if _, err := h.QuerySessions(ctx, bad); memory.ErrorCode(err) != memory.EINVALID {
			t.Errorf("%+v: err %v, want invalid_request", bad, err)
		}
	}
}

func TestSessionHistoryAndTuning(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t, memorytest.WithEvents(t))
	ctx := memory.NewContextWithTenant(context.Background(), "t1")
	h.Compacted(t, ctx, "s")
	h.Compacted(t, ctx, "s2")
	st, err := h.GetSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	hist, err := h.SessionHistory(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Compactions) != st.Compactions || st.Compactions == 0 {
		t.Fatalf("%d compactions in the history, the session counts %d", len(hist.Compactions), st.Compactions)
	}
	if len(hist.Points) < 60 {
		t.Fatalf("%d points for 60 writes", len(hist.Points))
	}
	for i, p := range hist.Points {
		if i > 0 && p.At.Before(hist.Points[i-1].At) {
			t.Fatalf("point %d at %v is before the one earlier", i, p.At)
		}
	}
	summarized := false
	for _, c := range hist.Compactions {
		if c.TokensAfter >= c.TokensBefore || c.Freed() <= 0 || c.Dropped+c.Summarized == 0 {
			t.Fatalf("compaction freed nothing: %+v", c)
		}
		if c.Summaries > 0 {
			summarized = true
			if c.SummarizedTokens <= c.SummaryTokens || c.SummaryTokens == 0 {
				t.Fatalf("summary of %d tokens for %d", c.SummaryTokens, c.SummarizedTokens)
			}
		}
	}
	if !summarized {
		t.Fatal("no compaction summarized: the compression ratio has nothing to show")
	}
	if _, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: "what is the zebrafish password manager vault on?"}); err != nil {
		t.Fatal(err)
	}
	one, err := h.Tuning(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	all, err := h.Tuning(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	cold := st.Messages.Dropped + st.Messages.Summarized
	binned := 0
	for _, b := range one.Drops.Bins {
		for _, n := range b {
			binned += n
		}
	}
	if one.Drops.Count < cold || binned != one.Drops.Count {
		t.Fatalf("%d drops (%d binned) for %d cold messages", one.Drops.Count, binned, cold)
	}
	if one.Drops.Cutoff != memory.DefaultPolicy.RelevanceCutoff {
		t.Fatalf("cutoff %v, the policy's is %v", one.Drops.Cutoff, memory.DefaultPolicy.RelevanceCutoff)
	}
	if all.Drops.Count <= one.Drops.Count {
		t.Fatalf("across sessions %d drops, one session %d", all.Drops.Count, one.Drops.Count)
	}
	if len(one.Recoveries) != 1 || one.Recoveries[0].Count == 0 || one.Recoveries[0].Sessions != 1 {
		t.Fatalf("recoveries per prompt: %+v", one.Recoveries)
	}
	if one.Ratio <= 1 || one.Freed <= 0 {
		t.Fatalf("compression %+v", one.Compression)
	}
	// Another tenant sees none of it.
	theirs, err := h.Tuning(memory.NewContextWithTenant(context.Background(), "t2"), "")
	if err != nil {
		t.Fatal(err)
	}
	if theirs.Drops.Count != 0 || len(theirs.Recoveries) != 0 || theirs.Freed != 0 {
		t.Fatalf("another tenant's tuning shows t1's events: %+v", theirs)
	}
	if _, err := h.SessionHistory(ctx, "../s"); memory.ErrorCode(err) != memory.EINVALID {
		t.Fatalf("bad id: %v", err)
	}
}

func TestHistoryWithoutEventLog(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	if _, err := h.SessionHistory(context.Background(), "s"); memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("history without a log: %v, want unavailable", err)
	}
	if _, err := h.Tuning(context.Background(), ""); memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("tuning without a log: %v, want unavailable", err)
	}
}
