package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
)

// The bench corpus is a pure function of its parameters: batch b (messages
// b*batch up to (b+1)*batch-1) is generated from its own PRNG stream, so any
// batch can be regenerated without the others and 1M messages never sit in
// memory together. Each batch goes into one session (b mod sessions) and is a
// piece of conversation: user and assistant turns, with assistant tool calls
// answered by long, log-like tool outputs.

const (
	benchVocabSize    = 4000 // generated pseudo-words
	benchMaxToolShare = 0.45
)

// benchCorpus describes the synthetic corpus.
type benchCorpus struct {
	Seed      uint64
	Messages  int
	Sessions  int
	Batch     int
	ToolShare float64 // wanted share of messages that are tool outputs
	WordsMin  int     // words of a chat turn
	WordsMax  int
	Prefix    string // session ids are Prefix + number

	pseudo []string
}

func newBenchCorpus(c benchCorpus) *benchCorpus {
	c.pseudo = benchPseudoWords(c.Seed, benchVocabSize)
	return &c
}

// batches is the number of batches the corpus has.
func (c *benchCorpus) batches() int { return (c.Messages + c.Batch - 1) / c.Batch }

// sessionOf names the session batch b goes into.
func (c *benchCorpus) sessionOf(b int) string { return c.sessionID(b % c.Sessions) }

func (c *benchCorpus) sessionID(s int) string { return fmt.Sprintf("%s%05d", c.Prefix, s) }

// benchGen draws text from the vocabulary with its own PRNG.
type benchGen struct {
	c      *benchCorpus
	r      *rand.Rand
	common *rand.Zipf
	pseudo *rand.Zipf
}

func (c *benchCorpus) gen(stream, n uint64) *benchGen {
	r := rand.New(rand.NewPCG(c.Seed^0x9e3779b97f4a7c15*stream, n))
	return &benchGen{c: c, r: r,
		common: rand.NewZipf(r, 1.05, 2, uint64(len(benchCommonWords)-1)),
		pseudo: rand.NewZipf(r, 1.07, 2, uint64(len(c.pseudo)-1))}
}

// batch generates batch b.
func (c *benchCorpus) batch(b int) []api.MessageIn {
	n := min(c.Batch, c.Messages-b*c.Batch)
	if n <= 0 {
		return nil
	}
	g := c.gen(1, uint64(b))
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(b) * time.Minute)
	msgs := make([]api.MessageIn, 0, n)
	// Tool calls: at an assistant turn, with probability p the assistant calls a
	// tool (2 messages) and takes the turn again; messages per user turn are
	// 2 + 2p/(1-p) of which p/(1-p) are tool outputs, a share of p/2.
	p := 2 * c.ToolShare
	user := true
	for len(msgs) < n {
		idx := b*c.Batch + len(msgs)
		switch {
		case user:
			msgs = append(msgs, api.MessageIn{Role: "user", Content: g.chat(), Metadata: map[string]any{"n": idx}})
			user = false
		case n-len(msgs) >= 2 && g.r.Float64() < p:
			call, out := g.toolPair(b, len(msgs), base.Add(time.Duration(len(msgs))*time.Second))
			call.Metadata = map[string]any{"n": idx}
			out.Metadata = map[string]any{"n": idx + 1}
			msgs = append(msgs, call, out)
		default:
			msgs = append(msgs, api.MessageIn{Role: "assistant", Content: g.chat(), Metadata: map[string]any{"n": idx}})
			user = true
		}
	}
	return msgs
}

// chat is one chat turn of WordsMin..WordsMax words.
func (g *benchGen) chat() string {
	n := g.c.WordsMin + g.r.IntN(g.c.WordsMax-g.c.WordsMin+1)
	return g.sentences(n)
}

func (g *benchGen) sentences(n int) string {
	var b strings.Builder
	left := 0
	for i := range n {
		if left == 0 {
			left = 4 + g.r.IntN(12)
			if i > 0 {
				b.WriteByte(' ')
			}
			w := g.word()
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		} else {
			b.WriteByte(' ')
			b.WriteString(g.word())
		}
		left--
		switch {
		case left == 0 || i == n-1:
			if g.r.IntN(7) == 0 {
				b.WriteByte('?')
			} else {
				b.WriteByte('.')
			}
			left = 0
		case g.r.IntN(10) == 0:
			b.WriteByte(',')
		}
	}
	return b.String()
}

// word is a common English word (55%), a pseudo-word (40%) or an
// identifier, path or number (5%), each list drawn Zipf-like.
func (g *benchGen) word() string {
	switch x := g.r.IntN(100); {
	case x < 55:
		return benchCommonWords[g.common.Uint64()]
	case x < 95:
		return g.pw()
	default:
		return g.special()
	}
}

func (g *benchGen) pw() string { return g.c.pseudo[g.pseudo.Uint64()] }

func (g *benchGen) special() string {
	r := g.r
	switch r.IntN(8) {
	case 0:
		a, b := g.pw(), g.pw()
		return a + strings.ToUpper(b[:1]) + b[1:] // camelCase identifier
	case 1:
		return g.pw() + "_" + g.pw()
	case 2:
		return "internal/" + g.pw() + "/" + g.pw() + ".go"
	case 3:
		return "/var/log/" + g.pw() + "/" + g.pw() + ".log"
	case 4:
		return strconv.Itoa(r.IntN(100000))
	case 5:
		return fmt.Sprintf("v%d.%d.%d", r.IntN(4), r.IntN(20), r.IntN(40))
	case 6:
		return fmt.Sprintf("0x%04x", r.IntN(1<<16))
	default:
		return fmt.Sprintf("%s-%d", strings.ToUpper(g.pw()[:3]), 100+r.IntN(9900))
	}
}

var benchTools = []string{"run_shell", "read_file", "grep", "run_tests", "http_get", "query_db"}

// toolPair is an assistant tool call and its 1-8 KB log-like output.
func (g *benchGen) toolPair(b, i int, at time.Time) (api.MessageIn, api.MessageIn) {
	r := g.r
	name := benchTools[r.IntN(len(benchTools))]
	var tc memory.ToolCall
	tc.ID = fmt.Sprintf("call_%d_%d", b, i)
	tc.Type = "function"
	tc.Function.Name = name
	tc.Function.Arguments = fmt.Sprintf(`{"target":"internal/%s/%s.go","pattern":"%s"}`, g.pw(), g.pw(), g.pw())
	call := api.MessageIn{Role: "assistant", ToolCalls: []memory.ToolCall{tc}}
	if r.IntN(2) == 0 {
		call.Content = g.sentences(5 + r.IntN(10))
	}
	out := api.MessageIn{Role: "tool", Name: name, ToolCallID: tc.ID, Content: g.logLines(1024+r.IntN(7*1024+1), at)}
	return call, out
}

var benchLevels = []string{"INFO ", "INFO ", "INFO ", "DEBUG", "DEBUG", "WARN ", "ERROR"}

// logLines writes log lines until size bytes.
func (g *benchGen) logLines(size int, at time.Time) string {
	r := g.r
	var b strings.Builder
	b.Grow(size + 200)
	for b.Len() < size {
		at = at.Add(time.Duration(r.IntN(900)) * time.Millisecond)
		b.WriteString(at.Format("2006-01-02T15:04:05.000Z"))
		b.WriteByte(' ')
		b.WriteString(benchLevels[r.IntN(len(benchLevels))])
		b.WriteByte(' ')
		switch r.IntN(5) {
		case 0:
			fmt.Fprintf(&b, "http %s /api/v%d/%s/%d -> %d in %dms", []string{"GET", "POST", "PUT"}[r.IntN(3)],
				1+r.IntN(3), g.pw(), r.IntN(10000), []int{200, 200, 200, 201, 404, 500, 502}[r.IntN(7)], r.IntN(900))
		case 1:
			fmt.Fprintf(&b, "%s/%s.go:%d %s", g.pw(), g.pw(), 10+r.IntN(900), g.sentences(4+r.IntN(8)))
		case 2:
			fmt.Fprintf(&b, "job=%s-%d rows=%d took=%dms status=%s", g.pw(), r.IntN(100), r.IntN(100000), r.IntN(5000),
				[]string{"ok", "ok", "ok", "retry", "failed"}[r.IntN(5)])
		case 3:
			fmt.Fprintf(&b, "--- %s Test%s%s (%.2fs)", []string{"PASS:", "PASS:", "FAIL:", "SKIP:"}[r.IntN(4)],
				strings.ToUpper(g.pw()[:1])+g.pw()[1:], strings.ToUpper(g.pw()[:1]), r.Float64()*3)
		default:
			fmt.Fprintf(&b, "%s: %s err=%q", g.pw(), g.sentences(3+r.IntN(6)), g.pw()+" "+g.pw())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// benchPseudoWords makes n distinct pronounceable non-words.
func benchPseudoWords(seed uint64, n int) []string {
	onsets := []string{"b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
		"br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "sk", "sl", "sp", "st", "str", "th", "tr", "qu"}
	vowels := []string{"a", "e", "i", "o", "u", "ai", "ea", "ee", "io", "ou", "oa", "y"}
	codas := []string{"", "", "", "n", "r", "s", "l", "m", "x", "nd", "st", "rk", "ck", "th"}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	seen := map[string]bool{}
	for _, w := range benchCommonWords {
		seen[w] = true
	}
	out := make([]string, 0, n)
	for len(out) < n {
		var b strings.Builder
		for range 2 + r.IntN(2) {
			b.WriteString(onsets[r.IntN(len(onsets))])
			b.WriteString(vowels[r.IntN(len(vowels))])
			b.WriteString(codas[r.IntN(len(codas))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// benchCommonWords are common English words, most frequent first.
var benchCommonWords = strings.Fields(`the of and to a in is it you that he was for on are with as I his they be at one
have this from or had by not word but what some we can out other were all there when up use your how said an each she
which do their time if will way about many then them write would like so these her long make thing see him two has look
more day could go come did number sound no most people my over know water than call first who may down side been now
find any new work part take get place made live where after back little only round man year came show every good me give
our under name very through just form sentence great think say help low line differ turn cause much mean before move
right boy old too same tell does set three want air well also play small end put home read hand port large spell add
even land here must big high such follow act why ask men change went light kind off need house picture try us again
animal point mother world near build self earth father head stand own page should country found answer school grow
study still learn plant cover food sun four between state keep eye never last let thought city tree cross farm hard
start might story saw far sea draw left late run while press close night real life few north open seem together next
white children begin got walk example ease paper group always music those both mark often letter until mile river car
feet care second book carry took science eat room friend began idea fish mountain stop once base hear horse cut sure
watch color face wood main enough plain girl usual young ready above ever red list though feel talk bird soon body dog
family direct pose leave song measure door product black short numeral class wind question happen complete ship area
half rock order fire south problem piece told knew pass since top whole king space heard best hour better true during
hundred five remember step early hold west ground interest reach fast verb sing listen six table travel less morning
ten simple several vowel toward war lay against pattern slow center love person money serve appear road map rain rule
govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star box
noun field rest correct able pound done beauty drive stood contain front teach week final gave green oh quick develop
ocean warm free minute strong special mind behind clear tail produce fact street inch multiply nothing course stay wheel
full force blue object decide surface deep moon island foot system busy test record boat common gold possible plane
stead dry wonder laugh thousand ago ran check game shape equate hot miss brought heat snow tire bring yes distant fill
east paint language among error server request file function build deploy config cache query index memory session
message token window prompt search result context agent model user assistant tool output log commit branch merge
release version bug fix issue review latency timeout retry queue worker database table schema migration`)
