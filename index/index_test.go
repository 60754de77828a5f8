package index

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ctxd/ctxd/memory"
)

// seed indexes a small fixed corpus: tenant "t1" sessions "a" and "b".
func seed(t *testing.T, x *Index) {
	t.Helper()
	msgs := []*memory.Message{
		msg("t1", "a", "a1", "We should deploy the billing service on Friday", 0),
		msg("t1", "a", "a2", "The cat sat on the mat and purred", 1),
		msg("t1", "a", "a3", "Grandma baked an apple pie for the picnic", 2),
		msg("t1", "b", "b1", "Deploying to production failed with a timeout", 0),
		msg("t1", "b", "b2", "I adopted a kitten from the shelter last week", 1),
		msg("t1", "b", "b3", "Quarterly revenue numbers look strong", 3),
	}
	for i, m := range msgs {
		m.CreatedAt = t0.Add(time.Duration(i) * 24 * time.Hour)
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 6})
}

func TestSearchModes(t *testing.T) {
	x := openTest(t, Options{})
	seed(t, x)

	t.Run("Text", func(t *testing.T) {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t1", Text: "billing service", Mode: memory.ModeText})
		if len(hits) != 1 || hits[0].ID != "a1" || hits[0].SessionID != "a" {
			t.Fatalf("hits = %+v", hits)
		}
		if hits[0].Score != 1 || hits[0].TextScore != 1 || hits[0].VectorScore != 0 {
			t.Errorf("scores = %+v", hits[0])
		}
	})
	t.Run("Vector", func(t *testing.T) {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t1", Vector: topicVec(1), Mode: memory.ModeVector, K: 2})
		if got := ids(hits); !sameSet(got, []string{"a2", "b2"}) {
			t.Fatalf("ids = %v", got)
		}
		for _, h := range hits {
			if h.SessionID != h.ID[:1] || h.TextScore != 0 {
				t.Errorf("hit = %+v", h)
			}
		}
	})
	t.Run("Hybrid", func(t *testing.T) {
		// Text finds only a1 (deploy/deploying both match "deploy"... and b1);
		// the vector of topic 0 agrees on a1 and b1.
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t1", Text: "deploy billing", Vector: topicVec(0)})
		if len(hits) < 2 || hits[0].ID != "a1" || hits[1].ID != "b1" {
			t.Fatalf("ids = %v", ids(hits))
		}
		for _, h := range hits {
			if h.Score < 0 || h.Score > 1 {
				t.Errorf("score out of [0,1]: %+v", h)
			}
			want := (1-DefaultVectorWeight)*h.TextScore + DefaultVectorWeight*h.VectorScore
			if diff := h.Score - want; diff > 1e-9 || diff < -1e-9 {
				t.Errorf("score %v is not the weighted sum %v", h.Score, want)
			}
		}
		if hits[0].Score != 1 {
			t.Errorf("best of both sides should score 1: %+v", hits[0])
		}
	})
	t.Run("HybridRRF", func(t *testing.T) {
		y := openTest(t, Options{Fusion: FusionRRF})
		seed(t, y)
		hits := mustSearch(t, y, memory.SearchQuery{Tenant: "t1", Text: "deploy billing", Vector: topicVec(0)})
		if hits[0].ID != "a1" || hits[0].Score != 1 {
			t.Fatalf("hits = %+v", hits)
		}
	})
	t.Run("HybridWithoutVectorIsText", func(t *testing.T) {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t1", Text: "kitten"})
		if got := ids(hits); !slices.Equal(got, []string{"b2"}) {
			t.Fatalf("ids = %v", got)
		}
	})
	t.Run("K", func(t *testing.T) {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t1", Vector: topicVec(5), K: 3})
		if len(hits) != 3 {
			t.Fatalf("%d hits, want 3", len(hits))
		}
		hits = mustSearch(t, x, memory.SearchQuery{Tenant: "t1", Vector: topicVec(5), K: 5000})
		if len(hits) != 6 {
			t.Fatalf("%d hits, want 6", len(hits))
		}
	})
}

func TestSearchInvalid(t *testing.T) {
	x := openTest(t, Options{})
	for name, q := range map[string]memory.SearchQuery{
		"NoTenant":       {Text: "x"},
		"Nothing":        {Tenant: "t"},
		"TextNoText":     {Tenant: "t", Mode: memory.ModeText, Vector: topicVec(0)},
		"VectorNoVector": {Tenant: "t", Mode: memory.ModeVector, Text: "x"},
		"BadMode":        {Tenant: "t", Mode: "fuzzy", Text: "x"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := x.Search(context.Background(), q)
			if memory.ErrorCode(err) != memory.EINVALID {
				t.Fatalf("err = %v, want %s", err, memory.EINVALID)
			}
		})
	}
	seed(t, x)
	_, err := x.Search(context.Background(), memory.SearchQuery{Tenant: "t1", Vector: []float32{1, 0}})
	if memory.ErrorCode(err) != memory.EINVALID {
		t.Fatalf("wrong dimension: err = %v", err)
	}
}

func TestFilters(t *testing.T) {
	x := openTest(t, Options{})
	seed(t, x)
	modes := map[string]memory.SearchQuery{
		memory.ModeText:   {Text: "deploy deploying kitten cat pie revenue", Mode: memory.ModeText},
		memory.ModeVector: {Vector: topicVec(0), Mode: memory.ModeVector},
		memory.ModeHybrid: {Text: "deploy deploying kitten cat pie revenue", Vector: topicVec(0)},
	}
	for mode, base := range modes {
		t.Run(mode, func(t *testing.T) {
			q := base
			q.Tenant, q.K = "t1", 100
			check := func(name string, q memory.SearchQuery, want []string) {
				t.Helper()
				if got := ids(mustSearch(t, x, q)); !sameSet(got, want) {
					t.Errorf("%s: ids = %v, want %v", name, got, want)
				}
			}
			all := []string{"a1", "a2", "a3", "b1", "b2", "b3"}
			check("all", q, all)
			qs := q
			qs.Sessions = []string{"b"}
			check("session b", qs, []string{"b1", "b2", "b3"})
			qs.Sessions = []string{"a", "b", "zzz"}
			check("sessions a b", qs, all)
			qt := q
			qt.Since = t0.Add(24 * time.Hour)
			qt.Until = t0.Add(3 * 24 * time.Hour)
			check("since-until", qt, []string{"a2", "a3", "b1"})
			qt.Until = time.Time{}
			check("since", qt, []string{"a2", "a3", "b1", "b2", "b3"})
			qst := q
			qst.States = []memory.State{memory.StateDropped}
			check("state none", qst, nil)
			qst.States = []memory.State{memory.StateDropped, memory.StateActive}
			check("states", qst, all)
			qi := q
			qi.IDs = []string{"a2", "b3", "nope"}
			check("ids", qi, []string{"a2", "b3"})
			qi.Sessions = []string{"b"}
			check("ids in session b", qi, []string{"b3"})
		})
	}
}

func TestTenantIsolation(t *testing.T) {
	x := openTest(t, Options{})
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{
		msg("acme", "s1", "acme-1", "secret launch plan for the rocket", 0),
		msg("globex", "s1", "globex-1", "secret launch plan for the rocket", 0),
	}, Watermark: 1})
	for _, mode := range []string{memory.ModeText, memory.ModeVector, memory.ModeHybrid} {
		for _, sessions := range [][]string{nil, {"s1"}} {
			hits := mustSearch(t, x, memory.SearchQuery{Tenant: "acme", Text: "rocket launch", Vector: topicVec(0), Mode: mode, Sessions: sessions})
			if got := ids(hits); !slices.Equal(got, []string{"acme-1"}) {
				t.Errorf("%s %v: ids = %v", mode, sessions, got)
			}
		}
	}
	if hits := mustSearch(t, x, memory.SearchQuery{Tenant: "nobody", Text: "rocket", Vector: topicVec(0)}); len(hits) != 0 {
		t.Errorf("unknown tenant: %v", ids(hits))
	}
	// Deleting acme's s1 leaves globex's s1.
	mustApply(t, x, memory.IndexBatch{DeleteSessions: []memory.SessionRef{{Tenant: "acme", ID: "s1"}}, Watermark: 2})
	hits := mustSearch(t, x, memory.SearchQuery{Tenant: "globex", Text: "rocket", Vector: topicVec(0)})
	if got := ids(hits); !slices.Equal(got, []string{"globex-1"}) {
		t.Errorf("globex after acme delete: %v", got)
	}
}

func TestDeleteSessions(t *testing.T) {
	old := sessionPage
	sessionPage = 7 // make the session's listing span pages
	t.Cleanup(func() { sessionPage = old })

	x := openTest(t, Options{})
	var msgs []*memory.Message
	for s := range 3 {
		for i := range 20 {
			msgs = append(msgs, msg("t", fmt.Sprintf("s%d", s), fmt.Sprintf("s%d-%02d", s, i), fmt.Sprintf("note number %d about gardening", i), i))
		}
	}
	msgs = append(msgs, msg("u", "s1", "u-s1", "note about gardening", 0))
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
	assertCount(t, x, 61, 61)

	mustApply(t, x, memory.IndexBatch{DeleteSessions: []memory.SessionRef{{Tenant: "t", ID: "s1"}}, Watermark: 2})
	assertCount(t, x, 41, 41)
	for _, mode := range []string{memory.ModeText, memory.ModeVector} {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "gardening", Vector: topicVec(0), Mode: mode, K: 1000})
		if len(hits) != 40 {
			t.Errorf("%s: %d hits, want 40", mode, len(hits))
		}
		for _, h := range hits {
			if h.SessionID == "s1" {
				t.Errorf("%s: hit in deleted session: %+v", mode, h)
			}
		}
	}
	if hits := mustSearch(t, x, memory.SearchQuery{Tenant: "u", Text: "gardening"}); len(hits) != 1 {
		t.Errorf("other tenant's s1: %d hits", len(hits))
	}

	// Messages of a session written after its delete in the same batch stay.
	mustApply(t, x, memory.IndexBatch{
		DeleteSessions: []memory.SessionRef{{Tenant: "t", ID: "s2"}},
		Upserts:        []*memory.Message{msg("t", "s2", "s2-new", "fresh start", 0)},
		Watermark:      3,
	})
	assertCount(t, x, 22, 22)

	// Deleting single messages.
	mustApply(t, x, memory.IndexBatch{Deletes: []*memory.Message{{Tenant: "t", SessionID: "s0", ID: "s0-00"}}, Watermark: 4})
	assertCount(t, x, 21, 21)
	hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "gardening", Vector: topicVec(0), K: 100})
	if hasID(hits, "s0-00") {
		t.Error("deleted message still found")
	}
}

func assertCount(t *testing.T, x *Index, text, vector uint64) {
	t.Helper()
	gotText, gotVec, err := x.Count()
	if err != nil {
		t.Fatal(err)
	}
	if gotText != text || gotVec != vector {
		t.Fatalf("Count() = %d, %d; want %d, %d", gotText, gotVec, text, vector)
	}
}

func TestStateChange(t *testing.T) {
	x := openTest(t, Options{})
	seed(t, x)
	active := []memory.State{memory.StateActive}
	dropped := []memory.State{memory.StateDropped}
	find := func(states []memory.State, mode string) bool {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t1", Text: "billing", Vector: topicVec(0), Mode: mode, States: states})
		return hasID(hits, "a1")
	}
	m := msg("t1", "a", "a1", "We should deploy the billing service on Friday", 0)
	m.State = memory.StateDropped
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{m}, Watermark: 7})
	for _, mode := range []string{memory.ModeText, memory.ModeVector} {
		if find(active, mode) || !find(dropped, mode) {
			t.Errorf("%s: state change to dropped not reflected", mode)
		}
	}
	// An upsert without a vector keeps the old vector and takes the new state.
	m.State = memory.StateRecovered
	m.Vector = nil
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{m}, Watermark: 8})
	recovered := []memory.State{memory.StateRecovered}
	for _, mode := range []string{memory.ModeText, memory.ModeVector} {
		if find(dropped, mode) || !find(recovered, mode) {
			t.Errorf("%s: state change without a vector not reflected", mode)
		}
	}
	assertCount(t, x, 6, 6)
}

func TestStemming(t *testing.T) {
	x := openTest(t, Options{})
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{
		msg("t", "s", "1", "we deploy on Mondays", 0),
		msg("t", "s", "2", "deploying takes an hour", 0),
		msg("t", "s", "3", "the deployment broke", 0),
		msg("t", "s", "4", "lunch at noon", 0),
	}, Watermark: 1})
	for _, word := range []string{"deploy", "deploying", "deployment", "Deployments"} {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: word, Mode: memory.ModeText})
		if got := ids(hits); !sameSet(got, []string{"1", "2", "3"}) {
			t.Errorf("%q: ids = %v", word, got)
		}
	}
}

func TestDateWords(t *testing.T) {
	if got := whenWords(time.Date(2023, 5, 7, 14, 0, 0, 0, time.UTC), time.UTC); got != "7 May 2023 Sunday afternoon" {
		t.Errorf("whenWords = %q", got)
	}
	x := openTest(t, Options{})
	a := msg("t", "s", "may", "went to the support group", 0)
	b := msg("t", "s", "june", "went to the support group", 0)
	b.CreatedAt = time.Date(2023, 6, 20, 9, 0, 0, 0, time.UTC)
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{a, b}, Watermark: 1})
	hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "support group in June 2023", Mode: memory.ModeText})
	if got := ids(hits); len(got) != 2 || got[0] != "june" {
		t.Errorf("ids = %v, want june first", got)
	}
}

func TestToolCallsAndNames(t *testing.T) {
	x := openTest(t, Options{})
	m := msg("t", "s", "call", "", 0)
	m.Role = memory.RoleAssistant
	m.ToolCalls = []memory.ToolCall{{ID: "c1", Type: "function", Function: memory.FunctionCall{Name: "restart_server", Arguments: `{"host":"web-7"}`}}}
	n := msg("t", "s", "named", "hello there", 1)
	n.Name = "Marisol"
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{m, n}, Watermark: 1})
	if hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "restart_server host"}); len(hits) != 1 || hits[0].ID != "call" {
		t.Errorf("tool call: %v", ids(hits))
	}
	if hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "marisol"}); len(hits) != 1 || hits[0].ID != "named" {
		t.Errorf("name: %v", ids(hits))
	}
}

func TestHighlight(t *testing.T) {
	x := openTest(t, Options{})
	long := strings.Repeat("filler words here and there ", 20) + "the deployment of the billing service failed " + strings.Repeat("more filler text follows ", 20)
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{
		msg("t", "s", "long", long, 0),
		msg("t", "s", "other", strings.Repeat("unrelated chatter about the weather ", 10), 1),
	}, Watermark: 1})
	hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "deploy billing", Vector: topicVec(1), Highlight: true})
	if len(hits) != 2 || hits[0].ID != "long" {
		t.Fatalf("hits = %+v", hits)
	}
	hl := hits[0].Highlight
	if !strings.Contains(hl, "«deployment»") || !strings.Contains(hl, "«billing»") {
		t.Errorf("text hit highlight = %q", hl)
	}
	other := hits[1].Highlight
	if !strings.HasPrefix(other, "unrelated chatter") || !strings.HasSuffix(other, "…") {
		t.Errorf("vector-only hit highlight = %q", other)
	}
	for _, h := range hits {
		if n := utf8.RuneCountInString(h.Highlight); n > 200 || strings.Contains(h.Highlight, "\n") {
			t.Errorf("highlight of %s is %d runes: %q", h.ID, n, h.Highlight)
		}
	}
	if hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "billing"}); hits[0].Highlight != "" {
		t.Error("highlight without asking")
	}
}

// A filter must not change scores: the same text in a small and a large
// session scores the same in a cross-session search.
func TestFiltersDoNotScore(t *testing.T) {
	x := openTest(t, Options{})
	var msgs []*memory.Message
	for i := range 30 {
		msgs = append(msgs, msg("t", "big", fmt.Sprintf("big%d", i), fmt.Sprintf("filler message %d", i), 1))
	}
	msgs = append(msgs, msg("t", "big", "big-x", "the comet was bright", 0), msg("t", "small", "small-x", "the comet was bright", 0))
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
	req := bleveScores(t, x, memory.SearchQuery{Tenant: "t", Text: "comet", States: []memory.State{memory.StateActive}, Since: t0.Add(-time.Hour)})
	if len(req) != 2 || req["big-x"] != req["small-x"] {
		t.Fatalf("raw scores = %v", req)
	}
}

func bleveScores(t *testing.T, x *Index, q memory.SearchQuery) map[string]float64 {
	t.Helper()
	return textScores(t, x, q, 10)
}

func TestConcurrentApplyAndSearch(t *testing.T) {
	x := openTest(t, Options{})
	c := newCorpus(1)
	msgs := c.messages("t", 400, 8, testDim, t0)
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				q := memory.SearchQuery{Tenant: "t", Text: c.vocab[len(stopWords)+i%50], Vector: hashVec(fmt.Sprint(g, i), testDim), Highlight: i%2 == 0}
				if i%3 == 0 {
					q.Sessions = []string{"s001"}
					q.States = []memory.State{memory.StateActive}
				}
				if _, err := x.Search(ctx, q); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := 0; i < len(msgs); i += 50 {
		b := memory.IndexBatch{Upserts: msgs[i : i+50], Watermark: uint64(i + 1)}
		if i%100 == 50 {
			b.Deletes = msgs[i-50 : i-40]
			b.DeleteSessions = []memory.SessionRef{{Tenant: "t", ID: "s007"}}
		}
		mustApply(t, x, b)
	}
	close(stop)
	wg.Wait()
	text, vec, err := x.Count()
	if err != nil || text != vec {
		t.Fatalf("Count() = %d, %d, %v: sides disagree", text, vec, err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// NoSummaries leaves the server's summaries out on both sides.
func TestNoSummariesFilter(t *testing.T) {
	x := openTest(t, Options{})
	sum := msg("t", "s", "sum", "summary: the billing service deploy moved to Friday", 0)
	sum.Kind = memory.KindSummary
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{
		msg("t", "s", "orig", "deploy the billing service on Friday", 0), sum}, Watermark: 2})
	for _, mode := range []string{memory.ModeText, memory.ModeVector, memory.ModeHybrid} {
		q := memory.SearchQuery{Tenant: "t", Text: "billing service deploy", Vector: topicVec(0), Mode: mode, K: 10}
		if got := ids(mustSearch(t, x, q)); !sameSet(got, []string{"orig", "sum"}) {
			t.Errorf("%s: ids = %v, want both", mode, got)
		}
		q.NoSummaries = true
		if got := ids(mustSearch(t, x, q)); !sameSet(got, []string{"orig"}) {
			t.Errorf("%s, no summaries: ids = %v, want the original only", mode, got)
		}
		q.Sessions = []string{"s"} // one session: the filter holds there too
		if got := ids(mustSearch(t, x, q)); !sameSet(got, []string{"orig"}) {
			t.Errorf("%s, no summaries in session s: ids = %v", mode, got)
		}
	}
}

// Candidates sets how many documents each side ranks before fusion, and so
// the range its scores are scaled over: the second best of two candidates
// scales to 0, of twenty to more.
func TestCandidatesPerSide(t *testing.T) {
	x := openTest(t, Options{})
	var docs []*memory.Message
	for i := 1; i <= 20; i++ {
		docs = append(docs, msg("t", "s", fmt.Sprintf("m%02d", i), strings.Repeat("alpha ", i)+"end", 0))
	}
	mustApply(t, x, memory.IndexBatch{Upserts: docs, Watermark: 20})
	second := func(candidates int) memory.Hit {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "alpha", K: 2, Candidates: candidates})
		if len(hits) != 2 {
			t.Fatalf("candidates %d: hits %+v", candidates, hits)
		}
		return hits[1]
	}
	if h := second(2); h.TextScore != 0 {
		t.Errorf("of two candidates, the second scaled to %v, want 0", h.TextScore)
	}
	if h := second(20); !(h.TextScore > 0.5) {
		t.Errorf("of twenty candidates, the second scaled to %v, want near the best", h.TextScore)
	}
}
