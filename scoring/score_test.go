package scoring

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// chat builds a session from texts, one turn each, every message a
// candidate with no similarity signal.
func chat(texts ...string) ([]Candidate, []Doc) {
	cands := make([]Candidate, len(texts))
	docs := make([]Doc, len(texts))
	for i, s := range texts {
		id := fmt.Sprintf("01HZX3K4M5N6P7Q8R9S0T1V%03d", i)
		cands[i] = Candidate{ID: id, Text: s, Turn: i}
		docs[i] = Doc{ID: id, Text: s, Turn: i}
	}
	return cands, docs
}

func mustScore(t testing.TB, p Params, cands []Candidate, all []Doc, newest int, now time.Time) []Score {
	t.Helper()
	out, err := ScoreAll(p, cands, all, newest, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(cands) {
		t.Fatalf("%d scores for %d candidates", len(out), len(cands))
	}
	for i, s := range out {
		if s.ID != cands[i].ID {
			t.Fatalf("score %d is for %q, want %q (input order)", i, s.ID, cands[i].ID)
		}
		checkBounds(t, s)
	}
	return out
}

func checkBounds(t testing.TB, s Score) {
	t.Helper()
	c := s.Components
	for name, v := range map[string]float64{"total": s.Total, "similarity": c.Similarity, "recency": c.Recency,
		"references": c.References, "importance": c.Importance} {
		if math.IsNaN(v) || v < 0 || v > 1 {
			t.Fatalf("%s: %s = %v, want in [0,1]", s.ID, name, v)
		}
	}
}

// filler is prose that shares nothing distinctive with anything.
var filler = []string{
	"Lunch was fine and the weather stayed mild all afternoon.",
	"Someone brought cake to the office, which everyone enjoyed.",
	"The meeting ran long but nobody minded very much.",
	"Traffic on the way home was lighter than expected.",
	"Coffee tasted better after the machine got cleaned.",
}

func TestReferencesRewardRepeatedTerms(t *testing.T) {
	terms := []string{
		"ERR_CONN_RESET", "/etc/nginx/nginx.conf", "https://x.io/a", "PROJ-4521", "getUserById",
		"7f9c2ab1e", "550e8400-e29b-41d4-a716-446655440000", `"connection reset by peer"`, "8080",
	}
	for _, term := range terms {
		t.Run(term, func(t *testing.T) {
			cands, docs := chat(
				"We saw "+term+" in the logs this morning.",
				filler[0],
				"Retried, and "+term+" showed up again.",
				filler[1],
				"Fixed: "+term+" no longer appears.",
			)
			s := mustScore(t, DefaultParams, cands, docs, 4, time.Time{})
			mentioned, ignored := s[0].Components.References, s[1].Components.References
			if !(mentioned > ignored) {
				t.Errorf("references: mentioned %v <= unmentioned %v", mentioned, ignored)
			}
			if ignored != 0 {
				t.Errorf("references of filler = %v, want 0", ignored)
			}
			if len(s[0].Referenced) == 0 {
				t.Errorf("no referenced terms named: %+v", s[0])
			}
		})
	}
}

func TestReferencesByKindStrength(t *testing.T) {
	// The same sentence, repeated later with one distinctive term: a code
	// identifier weighs more than a rare plain word.
	score := func(term string) float64 {
		texts := []string{"Look at " + term + " closely."}
		texts = append(texts, filler...)
		texts = append(texts, "Back to "+term+" now.")
		cands, docs := chat(texts...)
		return mustScore(t, DefaultParams, cands, docs, len(texts)-1, time.Time{})[0].Components.References
	}
	word, ident := score("zeppelin"), score("ZEPPELIN_MODE")
	if !(ident > word && word > 0) {
		t.Errorf("identifier %v, rare word %v: want identifier > word > 0", ident, word)
	}
}

func TestReferencesIDMention(t *testing.T) {
	cands, docs := chat(
		"The deploy plan is below.",
		"A second plan, also below.",
		filler[0],
		"As agreed in 01HZX3K4M5N6P7Q8R9S0T1V000, go ahead.",
	)
	s := mustScore(t, DefaultParams, cands, docs, 3, time.Time{})
	if !(s[0].Components.References > s[1].Components.References) {
		t.Errorf("mentioned by id %v <= unmentioned %v", s[0].Components.References, s[1].Components.References)
	}
	if len(s[0].Referenced) == 0 || s[0].Referenced[0] != "@"+cands[0].ID {
		t.Errorf("referenced = %v, want the id mention first", s[0].Referenced)
	}

	// One id mention outweighs one repeated identifier.
	cands, docs = chat(
		"The deploy plan is below.",
		"Set MAX_POOL_SIZE here.",
		"Per 01hzx3k4m5n6p7q8r9s0t1v000 (any case), and MAX_POOL_SIZE too.",
	)
	s = mustScore(t, DefaultParams, cands, docs, 2, time.Time{})
	if !(s[0].Components.References > s[1].Components.References) {
		t.Errorf("id mention %v <= identifier %v", s[0].Components.References, s[1].Components.References)
	}
}

func TestReferencesOnlyLaterCount(t *testing.T) {
	cands, docs := chat(
		"ERR_CONN_RESET at 01HZX3K4M5N6P7Q8R9S0T1V002 first.",
		"ERR_CONN_RESET again, see 01HZX3K4M5N6P7Q8R9S0T1V002.",
		"So ERR_CONN_RESET is the problem.",
		filler[0],
	)
	s := mustScore(t, DefaultParams, cands, docs, 3, time.Time{})
	if r := s[2].Components.References; r != 0 {
		t.Errorf("a message repeated and mentioned only by earlier ones has references %v, want 0", r)
	}
	if !(s[0].Components.References > s[1].Components.References && s[1].Components.References > 0) {
		t.Errorf("references %v, %v: want the first (two later repeats) above the second (one)",
			s[0].Components.References, s[1].Components.References)
	}
}

func TestReferencesCountNonCandidates(t *testing.T) {
	cands, docs := chat("ERR_CONN_RESET first.", filler[0], "ERR_CONN_RESET again.")
	// Only the first message is a candidate; the third is in the window.
	s := mustScore(t, DefaultParams, cands[:1], docs, 2, time.Time{})
	if s[0].Components.References == 0 {
		t.Error("a later message that is not a candidate did not count")
	}
	// A candidate the session does not hold is scored from its own text.
	c := Candidate{ID: "elsewhere-1", Text: "ERR_CONN_RESET", Turn: 1}
	s = mustScore(t, DefaultParams, []Candidate{c}, docs, 2, time.Time{})
	if s[0].Components.References == 0 {
		t.Error("a candidate outside the session got no references")
	}
}

func TestReferencesMonotone(t *testing.T) {
	var prev float64
	for repeats := 0; repeats <= 6; repeats++ {
		texts := []string{"Pool exhausted: ERR_POOL_EXHAUSTED in /srv/db/pool.go"}
		for i := range repeats {
			texts = append(texts, filler[i%len(filler)], "Still ERR_POOL_EXHAUSTED.")
		}
		cands, docs := chat(texts...)
		r := mustScore(t, DefaultParams, cands, docs, len(texts)-1, time.Time{})[0].Components.References
		if r < prev || repeats > 0 && r == prev {
			t.Errorf("%d repeats: references %v, not above %d repeats' %v", repeats, r, repeats-1, prev)
		}
		prev = r
	}
	prev = 0
	idents := []string{"ERR_ONE", "ERR_TWO", "ERR_THREE", "ERR_FOUR", "/srv/a.go", "https://x.io/b"}
	for n := 1; n <= len(idents); n++ {
		cands, docs := chat("Saw "+strings.Join(idents, " "), filler[0], "Now: "+strings.Join(idents[:n], ", "))
		r := mustScore(t, DefaultParams, cands, docs, 2, time.Time{})[0].Components.References
		if !(r > prev) {
			t.Errorf("%d shared terms: references %v, not above %v", n, r, prev)
		}
		prev = r
	}
}

func TestReferencesIgnoreCommonWords(t *testing.T) {
	// "server" and "deploy" are in every message: they identify none.
	var texts []string
	for i := range 30 {
		texts = append(texts, fmt.Sprintf("server deploy status report number %d", i))
	}
	cands, docs := chat(texts...)
	for _, s := range mustScore(t, DefaultParams, cands, docs, 29, time.Time{}) {
		if s.Components.References != 0 {
			t.Fatalf("%s: references %v from common words (%v), want 0", s.ID, s.Components.References, s.Referenced)
		}
	}
}

func TestReferencesShardsAgree(t *testing.T) {
	cands, docs := session(400, 7)
	want := references(cands, docs, 1)
	for _, shards := range []int{2, 3, 7, 1000} {
		if got := references(cands, docs, shards); !reflect.DeepEqual(got, want) {
			t.Errorf("%d shards disagree with one", shards)
		}
	}
}

func TestRecency(t *testing.T) {
	p := DefaultParams
	p.HalfLifeTurns = 10
	cands := []Candidate{{ID: "a", Turn: 100}, {ID: "b", Turn: 90}, {ID: "c", Turn: 80}, {ID: "d", Turn: 79}, {ID: "e", Turn: 120}}
	s := mustScore(t, p, cands, nil, 100, time.Time{})
	rec := func(i int) float64 { return s[i].Components.Recency }
	if rec(0) != 1 || rec(4) != 1 {
		t.Errorf("newest (or newer) message recency %v, %v; want 1", rec(0), rec(4))
	}
	if math.Abs(rec(1)-0.5) > 1e-12 || math.Abs(rec(2)-0.25) > 1e-12 {
		t.Errorf("recency at one and two half-lives = %v, %v; want 0.5, 0.25", rec(1), rec(2))
	}
	if !(rec(3) < rec(2)) {
		t.Error("recency does not decrease with distance")
	}

	// Time-based: the larger decay wins; off when HalfLife is 0.
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	p.HalfLife = time.Hour
	cands = []Candidate{
		{ID: "old-turn-new-time", Turn: 0, CreatedAt: now.Add(-time.Hour)},
		{ID: "new-turn-old-time", Turn: 100, CreatedAt: now.Add(-48 * time.Hour)},
		{ID: "no-time", Turn: 0},
	}
	s = mustScore(t, p, cands, nil, 100, now)
	if math.Abs(rec(0)-0.5) > 1e-12 || rec(1) != 1 || rec(2) != math.Exp2(-10) {
		t.Errorf("recency with both half-lives = %v, %v, %v; want 0.5, 1, 2^-10", rec(0), rec(1), rec(2))
	}
	p.HalfLife = 0
	s = mustScore(t, p, cands, nil, 100, now)
	if rec(0) != math.Exp2(-10) {
		t.Errorf("HalfLife 0 still decays by time: %v", rec(0))
	}
}

func TestImportanceAddsItsWeight(t *testing.T) {
	for _, p := range []Params{DefaultParams, {Weights: Weights{1, 2, 3, 4}, VectorWeight: 0.5, HalfLifeTurns: 3}} {
		cands, docs := chat("ERR_X at /a/b.go", "ERR_X again", filler[0])
		cands[0].BM25, cands[1].BM25, cands[2].BM25 = 3, 1, 2
		plain := mustScore(t, p, cands, docs, 2, time.Time{})
		cands[0].Important = true
		marked := mustScore(t, p, cands, docs, 2, time.Time{})
		want := p.Weights.Importance / p.Weights.sum()
		if d := marked[0].Total - plain[0].Total; math.Abs(d-want) > 1e-12 {
			t.Errorf("important adds %v, want its normalised weight %v", d, want)
		}
		if marked[0].Components.Importance != 1 || plain[0].Components.Importance != 0 {
			t.Error("importance component is not 1/0")
		}
	}
}

func TestSimilarity(t *testing.T) {
	sims := func(cands []Candidate) []float64 {
		var out []float64
		for _, s := range mustScore(t, DefaultParams, cands, nil, 0, time.Time{}) {
			out = append(out, s.Components.Similarity)
		}
		return out
	}
	tests := []struct {
		name  string
		cands []Candidate
		check func([]float64) bool
	}{
		{"all zero", []Candidate{{ID: "a"}, {ID: "b"}}, func(s []float64) bool { return s[0] == 0 && s[1] == 0 }},
		{"single", []Candidate{{ID: "a", BM25: 7, Cosine: 0.9}}, func(s []float64) bool { return s[0] == 0 }},
		{"equal bm25, cosine decides fully", []Candidate{{ID: "a", BM25: 2, Cosine: 0.2}, {ID: "b", BM25: 2, Cosine: 0.8}},
			func(s []float64) bool { return s[0] == 0 && s[1] == 1 }},
		{"no vectors, bm25 decides fully", []Candidate{{ID: "a", BM25: 1}, {ID: "b", BM25: 5}, {ID: "c"}},
			func(s []float64) bool { return s[1] == 1 && s[2] == 0 && s[0] > 0 && s[0] < 1 }},
		{"negative cosines clip to no signal", []Candidate{{ID: "a", Cosine: -0.5}, {ID: "b", Cosine: -0.9}},
			func(s []float64) bool { return s[0] == 0 && s[1] == 0 }},
		{"best on both is 1", []Candidate{{ID: "a", BM25: 9, Cosine: 0.9}, {ID: "b", BM25: 1, Cosine: 0.1}},
			func(s []float64) bool { return s[0] == 1 && s[1] == 0 }},
		{"mix follows the vector weight", []Candidate{{ID: "a", BM25: 9, Cosine: 0.1}, {ID: "b", BM25: 1, Cosine: 0.9}},
			func(s []float64) bool {
				return math.Abs(s[0]-(1-DefaultParams.VectorWeight)) < 1e-12 && math.Abs(s[1]-DefaultParams.VectorWeight) < 1e-12
			}},
		{"non-finite inputs count as 0", []Candidate{{ID: "a", BM25: math.NaN(), Cosine: math.Inf(1)}, {ID: "b", BM25: math.Inf(1), Cosine: 0.5}},
			func(s []float64) bool { return s[0] == 0 && s[1] == 1 }},
	}
	for _, tt := range tests {
		if s := sims(tt.cands); !tt.check(s) {
			t.Errorf("%s: similarities %v", tt.name, s)
		}
	}

	// Monotone: more BM25 at equal cosine never lowers similarity.
	cands := []Candidate{{ID: "a", BM25: 1, Cosine: 0.3}, {ID: "b", BM25: 2, Cosine: 0.3}, {ID: "c", BM25: 4, Cosine: 0.3}, {ID: "d", Cosine: 0.7}}
	s := sims(cands)
	if !(s[0] < s[1] && s[1] < s[2]) {
		t.Errorf("similarity not increasing with BM25: %v", s)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultParams.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if s := DefaultParams.Weights.sum(); math.Abs(s-1) > 1e-12 {
		t.Errorf("default weights sum to %v, want 1", s)
	}
	bad := map[string]func(*Params){
		"negative weight":     func(p *Params) { p.Weights.Recency = -0.1 },
		"NaN weight":          func(p *Params) { p.Weights.Similarity = math.NaN() },
		"infinite weight":     func(p *Params) { p.Weights.References = math.Inf(1) },
		"all zero":            func(p *Params) { p.Weights = Weights{} },
		"sum overflows":       func(p *Params) { p.Weights = Weights{math.MaxFloat64, math.MaxFloat64, 0, 0} },
		"vector weight > 1":   func(p *Params) { p.VectorWeight = 1.5 },
		"vector weight < 0":   func(p *Params) { p.VectorWeight = -1 },
		"vector weight NaN":   func(p *Params) { p.VectorWeight = math.NaN() },
		"half-life turns 0":   func(p *Params) { p.HalfLifeTurns = 0 },
		"half-life turns NaN": func(p *Params) { p.HalfLifeTurns = math.NaN() },
		"half-life turns inf": func(p *Params) { p.HalfLifeTurns = math.Inf(1) },
		"negative half-life":  func(p *Params) { p.HalfLife = -time.Second },
	}
	for name, mutate := range bad {
		p := DefaultParams
		mutate(&p)
		if p.Validate() == nil {
			t.Errorf("%s: valid", name)
		}
		if _, err := ScoreAll(p, []Candidate{{ID: "a"}}, nil, 0, time.Time{}); err == nil {
			t.Errorf("%s: ScoreAll accepted it", name)
		}
	}
	good := DefaultParams
	good.Weights = Weights{Importance: 1}
	good.VectorWeight, good.HalfLife = 1, time.Hour
	if err := good.Validate(); err != nil {
		t.Errorf("one nonzero weight: %v", err)
	}
}

func TestWeightsScaleFree(t *testing.T) {
	cands, docs := session(60, 3)
	p := DefaultParams
	a := mustScore(t, p, cands, docs, 59, time.Time{})
	p.Weights = Weights{4.5, 2.5, 2, 1}
	b := mustScore(t, p, cands, docs, 59, time.Time{})
	for i := range a {
		if math.Abs(a[i].Total-b[i].Total) > 1e-12 {
			t.Fatalf("scaling the weights changed a total: %v vs %v", a[i].Total, b[i].Total)
		}
	}
}

func TestDeterministic(t *testing.T) {
	cands, docs := session(3000, 4) // big enough for parallel shards
	now := cands[len(cands)-1].CreatedAt
	want := mustScore(t, DefaultParams, cands, docs, len(cands)-1, now)
	// The session's order does not matter, only turns do.
	shuffled := append([]Doc(nil), docs...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			all := docs
			if g%2 == 1 {
				all = shuffled
			}
			got, err := ScoreAll(DefaultParams, cands, all, len(cands)-1, now)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("run %d differs (err %v)", g, err)
			}
		})
	}
	wg.Wait()
}

func TestTotalIsWeightedSum(t *testing.T) {
	cands, docs := session(200, 5)
	p := Params{Weights: Weights{0.3, 0.1, 0.5, 0.1}, VectorWeight: 0.7, HalfLifeTurns: 5, HalfLife: time.Hour}
	for _, s := range mustScore(t, p, cands, docs, 199, cands[199].CreatedAt) {
		c := s.Components
		want := 0.3*c.Similarity + 0.1*c.Recency + 0.5*c.References + 0.1*c.Importance
		if math.Abs(s.Total-want) > 1e-12 {
			t.Fatalf("%s: total %v, weighted sum %v", s.ID, s.Total, want)
		}
	}
}

// TestRandomInputs throws random sessions, signals and parameters at
// ScoreAll and checks the bounds.
func TestRandomInputs(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 42))
	pieces := []string{"ERR_A", "ERR_B", "/x/y.go", "https://q.io/z", "8080", "zeppelin", "the", "and", `"two words"`,
		"01HZX3K4M5N6P7Q8R9S0T1V000", "01HZX3K4M5N6P7Q8R9S0T1V001", "v2", "é", "“", "'", "$9", "3.5ms", "", " "}
	odd := []float64{0, -1, 1, math.NaN(), math.Inf(1), math.Inf(-1), 1e308, -1e308, 5e-324}
	pick := func(normal func() float64) float64 {
		if r.IntN(5) == 0 {
			return odd[r.IntN(len(odd))]
		}
		return normal()
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := range 300 {
		n := r.IntN(40)
		cands := make([]Candidate, n)
		var docs []Doc
		for i := range n {
			var b strings.Builder
			for range r.IntN(12) {
				b.WriteString(pieces[r.IntN(len(pieces))] + " ")
			}
			cands[i] = Candidate{
				ID: fmt.Sprintf("01HZX3K4M5N6P7Q8R9S0T1V%03d", r.IntN(n+1)), Text: b.String(), Turn: r.IntN(50) - 5,
				Important: r.IntN(3) == 0, CreatedAt: now.Add(-time.Duration(r.IntN(1e6)) * time.Second),
				BM25: pick(func() float64 { return r.Float64() * 20 }), Cosine: pick(func() float64 { return r.Float64()*2 - 1 }),
			}
			if r.IntN(4) > 0 {
				docs = append(docs, Doc{cands[i].ID, cands[i].Text, cands[i].Turn})
			}
		}
		p := Params{
			Weights:       Weights{r.Float64() * 3, r.Float64(), r.Float64() * 2, r.Float64()},
			VectorWeight:  r.Float64(),
			HalfLifeTurns: 0.1 + r.Float64()*50,
			HalfLife:      time.Duration(r.IntN(3)) * time.Hour,
		}
		if p.Weights.sum() == 0 {
			p.Weights.Recency = 1
		}
		out := mustScore(t, p, cands, docs, r.IntN(60)-10, now)
		if t.Failed() {
			t.Fatalf("round %d", round)
		}
		for _, s := range out {
			if strings.Contains(Explain(s, p), "NaN") {
				t.Fatalf("round %d: %s", round, Explain(s, p))
			}
		}
	}
}

func TestEmptyInputs(t *testing.T) {
	if out := mustScore(t, DefaultParams, nil, nil, 0, time.Time{}); len(out) != 0 {
		t.Errorf("scores for no candidates: %v", out)
	}
	s := mustScore(t, DefaultParams, []Candidate{{ID: "a", Text: "ERR_X"}}, nil, 0, time.Time{})
	if s[0].Components.References != 0 {
		t.Error("references without a session")
	}
}

func TestExplain(t *testing.T) {
	cands, docs := chat("We saw ERR_CONN_RESET.", "ERR_CONN_RESET again.")
	cands[0].Important = true
	p := DefaultParams
	p.Weights = Weights{4.5, 2.5, 2, 1} // shown normalised
	s := mustScore(t, p, cands, docs, 1, time.Time{})[0]
	got := Explain(s, p)
	c := s.Components
	want := fmt.Sprintf("%.2f = 0.45*sim %.2f + 0.25*rec %.2f + 0.20*ref %.2f + 0.10*imp 1 (referenced: err_conn_reset)",
		s.Total, c.Similarity, c.Recency, c.References)
	if got != want {
		t.Errorf("Explain:\n got %s\nwant %s", got, want)
	}
	if strings.Contains(got, "\n") {
		t.Error("Explain is not one line")
	}
}

// Indexes reuse the buffers of earlier ones: scoring a session after a
// larger, different one gives what it gave before.
func TestReferencesAfterOtherSessions(t *testing.T) {
	small, smallDocs := session(50, 11)
	want := references(small, smallDocs, 1)
	for _, seed := range []uint64{12, 13} {
		big, bigDocs := session(2000, seed)
		references(big, bigDocs, 4)
		if got := references(small, smallDocs, 1); !reflect.DeepEqual(got, want) {
			t.Fatalf("after a session of seed %d the scores changed", seed)
		}
	}
}

// Scores from the scans docTerms keeps are those of scanning every text
// afresh: with the cache cold (filling it), warm, and after texts change
// under the same ids; with id mentions among the texts.
func TestTermCacheScoresAsScanning(t *testing.T) {
	cands, docs := session(1500, 7)
	for i := 40; i < len(docs); i += 40 { // later messages name earlier ones
		docs[i].Text += " see " + strings.ToLower(docs[i-37].ID) + " and " + docs[i-3].ID
		cands[i].Text = docs[i].Text
	}
	now := cands[len(cands)-1].CreatedAt
	saved := docTerms
	defer func() { docTerms = saved }()
	score := func(cache *termCache) []Score {
		docTerms = cache
		return mustScore(t, DefaultParams, cands, docs, len(cands)-1, now)
	}
	want := score(nil)
	cache := newTermCache(termCacheBytes)
	for _, run := range []string{"cold", "warm"} {
		if got := score(cache); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s cache: scores differ from scanning", run)
		}
	}
	for i := 0; i < len(docs); i += 5 {
		docs[i].Text += " PROJ-4242 src/changed.go"
		cands[i].Text = docs[i].Text
	}
	want = score(nil)
	if got := score(cache); !reflect.DeepEqual(got, want) {
		t.Fatal("after texts changed: scores differ from scanning")
	}
	if got := score(newTermCache(64 << 10)); !reflect.DeepEqual(got, want) {
		t.Fatal("with a small cache: scores differ from scanning")
	}
}
