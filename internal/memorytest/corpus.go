package memorytest

import (
	"fmt"
	"math/rand"
	"strings"
)

// ZipfCorpus makes n chat turns of 15-60 words drawn Zipf-like from a
// vocabulary of 5,000 pseudo-words, with an id now and then: term
// frequencies like a real conversation's, so full-text costs are
// realistic. The same seed gives the same turns.
func ZipfCorpus(n int, seed int64) []string {
	r := rand.New(rand.NewSource(seed))
	vocab := make([]string, 5000)
	for i := range vocab {
		w := make([]byte, 3+r.Intn(7))
		for j := range w {
			w[j] = byte('a' + r.Intn(26))
		}
		vocab[i] = string(w)
	}
	z := rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))
	out := make([]string, n)
	for i := range out {
		words := make([]string, 15+r.Intn(46))
		for j := range words {
			words[j] = vocab[z.Uint64()]
		}
		if r.Intn(5) == 0 {
			words = append(words, fmt.Sprintf("PROJ-%d", r.Intn(n)))
		}
		out[i] = strings.Join(words, " ")
	}
	return out
}

// Chatter is turn i of a filler conversation: text in the shape of a real
// turn, on six topics, two to a turn, so that turns share words and none
// stands out to a query.
func Chatter(i int) string {
	topics := []string{"the weather was mild so we walked along the river", "lunch was a sandwich from the corner shop",
		"the train ran late again this morning", "we talked about a film neither of us liked much",
		"the garden needs watering after the dry week", "a neighbour is repainting their fence"}
	return fmt.Sprintf("turn %d: %s, and then %s.", i, topics[i%len(topics)], topics[(i*7+3)%len(topics)])
}
