package index

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

const testDim = 16

// topicVec is a deterministic unit vector for topic i: messages and queries
// about the same topic are close, different topics are nearly orthogonal.
func topicVec(i int) []float32 {
	v := make([]float32, testDim)
	v[i%testDim] = 1
	v[(i+1)%testDim] = 0.2
	normalize(v)
	return v
}

// hashVec is a deterministic pseudo-random unit vector of dimension dim.
func hashVec(seed string, dim int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(seed))
	r := rand.New(rand.NewPCG(h.Sum64(), 7))
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	normalize(v)
	return v
}

// alikeVec is a unit vector that shares a direction with every other
// alikeVec of dim, as sentence vectors do: their scores against a query
// lie close together, which is what makes a top n hard to bound.
func alikeVec(seed string, dim int) []float32 {
	common, v := hashVec("common", dim), hashVec(seed, dim)
	for j := range v {
		v[j] = 0.3*v[j] + common[j]
	}
	normalize(v)
	return v
}

var t0 = time.Date(2023, 5, 7, 14, 30, 0, 0, time.UTC)

func msg(tenant, session, id, content string, topic int) *memory.Message {
	return &memory.Message{
		ID:        id,
		Tenant:    tenant,
		SessionID: session,
		Role:      memory.RoleUser,
		Content:   content,
		CreatedAt: t0,
		Tokens:    len(strings.Fields(content)),
		State:     memory.StateActive,
		Vector:    topicVec(topic),
	}
}

// memTexts is a TextSource over messages held in memory: what the store
// is to a server. openTest's index reads those mustApply applied.
type memTexts struct {
	mu sync.Mutex
	m  map[string]*memory.Message
}

func textsOf(msgs []*memory.Message) *memTexts {
	t := &memTexts{m: map[string]*memory.Message{}}
	t.add(msgs)
	return t
}

func (t *memTexts) add(msgs []*memory.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		t.m[m.ID] = m
	}
}

func (t *memTexts) MessagesByID(_ context.Context, tenant string, ids []string, _ bool) ([]*memory.Message, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*memory.Message
	for _, id := range ids {
		if m := t.m[id]; m != nil && m.Tenant == tenant {
			out = append(out, m)
		}
	}
	return out, nil
}

func openTest(tb testing.TB, opts Options) *Index {
	tb.Helper()
	if opts.Texts == nil {
		opts.Texts = textsOf(nil)
	}
	x, err := Open(filepath.Join(tb.TempDir(), "idx"), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = x.Close() })
	return x
}

func mustApply(tb testing.TB, x *Index, b memory.IndexBatch) {
	tb.Helper()
	if err := x.Apply(context.Background(), b); err != nil {
		tb.Fatal(err)
	}
	if t, ok := x.opts.Texts.(*memTexts); ok {
		t.add(b.Upserts)
	}
}

func mustSearch(tb testing.TB, x *Index, q memory.SearchQuery) []memory.Hit {
	tb.Helper()
	hits, err := x.Search(context.Background(), q)
	if err != nil {
		tb.Fatal(err)
	}
	return hits
}

func ids(hits []memory.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func hasID(hits []memory.Hit, id string) bool {
	for _, h := range hits {
		if h.ID == id {
			return true
		}
	}
	return false
}

// corpus generates n messages of about 60 words over sessions sessions of
// one tenant, with dim-dimensional vectors.
type corpus struct {
	vocab []string
	rng   *rand.Rand
}

// stopWords start the corpus vocabulary: in English about half of all words
// are such, and the analyzer drops them.
var stopWords = strings.Fields(`the of and to a in is it you that he was for on are with as i his they be at
one have this from or had by but some what there we can out other were all your when up use how said an each
she which do their if will way about many then them would so these her him has more could go come did my no
most who over know than been its now people only into just not me also our any those very what much should
still such why here off again same under never down before after while both most own really`)

func newCorpus(seed uint64) *corpus {
	r := rand.New(rand.NewPCG(seed, 1))
	// Zipf over the stop words then 30k made-up words: a content word of
	// rank 200 is in ~3% of 60-word messages, as in chat.
	syll := []string{"ka", "lo", "mi", "ten", "ra", "dus", "po", "ve", "shi", "an", "gor", "bel", "tri", "mon", "sa"}
	vocab := slices.Clone(stopWords)
	for i := range 30_000 {
		var b strings.Builder
		for j := 0; j < 2+i%3; j++ {
			b.WriteString(syll[r.IntN(len(syll))])
		}
		vocab = append(vocab, fmt.Sprintf("%s%d", b.String(), i))
	}
	return &corpus{vocab: vocab, rng: r}
}

func (c *corpus) word() string {
	// Zipf: index ~ exp(uniform * ln(N)).
	i := int(math.Exp(c.rng.Float64()*math.Log(float64(len(c.vocab))))) - 1
	return c.vocab[i]
}

func (c *corpus) text(words int) string {
	w := make([]string, words)
	for i := range w {
		w[i] = c.word()
	}
	return strings.Join(w, " ")
}

func (c *corpus) messages(tenant string, n, sessions, dim int, start time.Time) []*memory.Message {
	out := make([]*memory.Message, n)
	for i := range out {
		id := fmt.Sprintf("m%07d", i)
		out[i] = &memory.Message{
			ID:        id,
			Tenant:    tenant,
			SessionID: fmt.Sprintf("s%03d", i%sessions),
			Role:      memory.RoleUser,
			Content:   c.text(60),
			CreatedAt: start.Add(time.Duration(i) * time.Minute),
			Tokens:    80,
			State:     memory.States[i%len(memory.States)],
			Vector:    hashVec(id, dim),
		}
	}
	return out
}
