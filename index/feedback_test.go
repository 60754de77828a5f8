package index

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// feedbackCorpus is 100 messages of tenant t: two that share rare words
// with a third, filler whose words are each in a few messages, and one
// word ("weather") in more than feedbackMaxShare of them.
func feedbackCorpus() []*memory.Message {
	docs := []*memory.Message{
		msg("t", "s", "first", "Odile joined the Thistlewood apiary and tends the hives", 0),
		msg("t", "s", "second", "The Thistlewood apiary sent its first honey jars", 0),
		msg("t", "s", "third", "Fenwick repainted the hives before the frost", 0),
	}
	fillers := []string{"lunch", "bus", "garden", "phone", "kettle", "ticket", "window", "laundry"}
	for i := len(docs); i < 100; i++ {
		text := fmt.Sprintf("the %s and the %s", fillers[i%len(fillers)], fillers[(i/len(fillers))%len(fillers)])
		if i%10 == 0 {
			text += " and the weather"
		}
		docs = append(docs, msg("t", "s", fmt.Sprintf("f%03d", i), text, 1))
	}
	return docs
}

// The feedback clause is made of the feedback texts' terms that are in
// more than one message and in few of them, never the query's own; the
// best at FeedbackWeight. A search with it finds a message that has none
// of the query's words but the rarer words of the feedback, and says which.
func TestFeedbackTerms(t *testing.T) {
	x := openTest(t, Options{})
	mustApply(t, x, memory.IndexBatch{Upserts: feedbackCorpus(), Watermark: 1})

	texts := []string{"Odile joined the Thistlewood apiary and tends the hives, whatever the weather"}
	terms := x.feedbackTerms("t", texts, "what did Odile join")
	var got []string
	for _, ft := range terms {
		got = append(got, ft.Term)
	}
	slices.Sort(got)
	// odil and join are the query's; tend is in one message only; weather
	// is common.
	if want := []string{"apiari", "hive", "thistlewood"}; !slices.Equal(got, want) {
		t.Fatalf("feedback terms %v, want %v", got, want)
	}
	if terms[0].Boost != DefaultFeedbackWeight {
		t.Errorf("best term's boost %v, want %v", terms[0].Boost, DefaultFeedbackWeight)
	}

	q := memory.SearchQuery{Tenant: "t", Text: "what did Odile join", Mode: memory.ModeHybrid, K: 3, Highlight: true}
	if hasID(mustSearch(t, x, q), "second") {
		t.Fatal("found without feedback: the test says nothing")
	}
	q.Feedback = texts
	hits := mustSearch(t, x, q)
	i := slices.IndexFunc(hits, func(h memory.Hit) bool { return h.ID == "second" })
	if i < 0 {
		t.Fatalf("with feedback, the message sharing its rarer words is not found: %v", ids(hits))
	}
	if want := []string{"thistlewood", "apiari"}; !slices.Equal(hits[i].Feedback, want) && !slices.Equal(hits[i].Feedback, []string{"apiari", "thistlewood"}) {
		t.Errorf("its feedback terms %v, want %v", hits[i].Feedback, want)
	}

	// Text mode is the literal match; a negative weight turns it off.
	q.Mode = memory.ModeText
	if hasID(mustSearch(t, x, q), "second") {
		t.Error("text mode used feedback")
	}
	off := openTest(t, Options{FeedbackWeight: -1})
	mustApply(t, off, memory.IndexBatch{Upserts: feedbackCorpus(), Watermark: 1})
	q.Mode = memory.ModeHybrid
	if hasID(mustSearch(t, off, q), "second") {
		t.Error("a negative weight used feedback")
	}
}
