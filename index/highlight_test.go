package index

import (
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2"
	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/ctxd/ctxd/memory"
)

// Snippets are cut from locations found by analysing the hit's text again;
// they must be the ones Bleve's own term locations give. The index keeps no
// term vectors, so the locations come from a reference index in memory: the
// same mapping and documents, with term vectors on the text field.
func TestSnippetMatchesBleveLocations(t *testing.T) {
	x := openTest(t, Options{})
	m, err := newMapping()
	if err != nil {
		t.Fatal(err)
	}
	m.DefaultMapping.Properties[fieldText].Fields[0].IncludeTermVectors = true
	ref, err := bleve.NewMemOnly(m)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	filler := strings.Repeat("some words in between that say little ", 8)
	texts := map[string]string{
		"a": "Deploying the billing service failed twice. " + filler + "The deployment was rolled back; billing is fine.",
		"b": "Café crème: the naïve façade of the café was repainted " + filler + "café again",
		"c": filler + "the walrus and the carpenter walked on the beach\nthe walrus wept",
		"d": "Caroline said she went to the LGBTQ support group on Sunday; " + filler + "Caroline's group helped",
		"e": strings.Repeat("deploy ", 50),
	}
	var msgs []*memory.Message
	for id, text := range texts {
		msgs = append(msgs, msg("t", "s", id, text, 0))
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
	for _, m := range msgs {
		if err := ref.Index(m.ID, newTextDoc(m, x.opts.Location)); err != nil {
			t.Fatal(err)
		}
	}

	adv, err := x.text.Advanced()
	if err != nil {
		t.Fatal(err)
	}
	r, err := adv.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, query := range []string{"deploy billing", "café", "walrus beach", "Caroline group sunday", "the deployments", "nothing matches zebra"} {
		q := memory.SearchQuery{Tenant: "t", Text: query}
		req := bleve.NewSearchRequestOptions(x.scopedQuery(&q, query, nil, true), 10, 0, false)
		req.IncludeLocations = true
		res, err := ref.Search(req)
		if err != nil {
			t.Fatal(err)
		}
		terms := x.analyzedTerms(query)
		for _, h := range res.Hits {
			doc, err := r.Document(h.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := cleanSnippet(x.hl.BestFragmentInField(h, doc, fieldText))
			if got := x.snippet(doc, storedText(doc), terms); got != want {
				t.Errorf("%q in %s:\n got %q\nwant %q", query, h.ID, got, want)
			}
		}
	}
}

func storedText(doc bindex.Document) string {
	var text string
	doc.VisitFields(func(f bindex.Field) {
		if f.Name() == fieldText {
			text = string(f.Value())
		}
	})
	return text
}

// A search that asks for snippets marks the matched words of text hits
// through the whole pipeline.
func TestSearchSnippetsWithoutLocations(t *testing.T) {
	x := openTest(t, Options{})
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{
		msg("t", "s", "m1", "We deployed the billing service on Friday", 0),
	}, Watermark: 1})
	hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "deploy", Mode: memory.ModeText, Highlight: true})
	if len(hits) != 1 || hits[0].Highlight != "We «deployed» the billing service on Friday" {
		t.Fatalf("hits = %+v", hits)
	}
}
