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
	textField := tenantField(fieldText, "t")
	withLocations := bleve.NewTextFieldMapping()
	withLocations.Analyzer, withLocations.Store, withLocations.IncludeTermVectors = analyzerName, true, true
	m.DefaultMapping.AddFieldMappingsAt(textField, withLocations)
	ref, err := bleve.NewMemOnly(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() }) // after the reader (cleanups run last first)
	filler := strings.Repeat("some words in between that say little ", 8)
	texts := map[string]string{
		"a": "Deploying the billing service failed twice. " + filler + "The deployment was rolled back; billing is fine.",
		"b": "Café crème: the naïve façade of the café was repainted " + filler + "café again",
		"c": filler + "the walrus and the carpenter walked on the beach\nthe walrus wept",
		"d": "Corinne said she went to the sea-kayak group on Sunday; " + filler + "Corinne's group helped",
		"e": strings.Repeat("deploy ", 50),
	}
	var msgs []*memory.Message
	for id, text := range texts {
		msgs = append(msgs, msg("t", "s", id, text, 0))
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
	for _, m := range msgs {
		if err := ref.Index(m.ID, map[string]any{fieldSession: m.SessionID, fieldTenant: m.Tenant, textField: m.Content}); err != nil {
			t.Fatal(err)
		}
	}

	r := openReader(t, ref)
	for _, query := range []string{"deploy billing", "café", "walrus beach", "Corinne group sunday", "the deployments", "nothing matches zebra"} {
		q := memory.SearchQuery{Tenant: "t", Text: query}
		req := bleve.NewSearchRequestOptions(x.scopedQuery(&q, query, extraTerms{}), 10, 0, false)
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
			want := cleanSnippet(x.hl.BestFragmentInField(h, doc, textField))
			if got := x.snippet(texts[h.ID], terms); got != want {
				t.Errorf("%q in %s:\n got %q\nwant %q", query, h.ID, got, want)
			}
		}
	}
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

// The index keeps no message text (the store has it): a document holds
// only its session among the fields Bleve can give back; snippets are cut
// from the text the TextSource gives, and without one hits come without.
func TestTextNotStored(t *testing.T) {
	m := msg("t", "s", "m1", "We deployed the billing service on Friday", 0)
	x := openTest(t, Options{})
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{m}, Watermark: 1})
	doc, err := openReader(t, x.text).Document("m1")
	if err != nil || doc == nil {
		t.Fatalf("document: %v, %v", doc, err)
	}
	var stored []string
	doc.VisitFields(func(f bindex.Field) { stored = append(stored, f.Name()) })
	if len(stored) != 1 || stored[0] != fieldSession {
		t.Fatalf("stored fields %v, want only %s", stored, fieldSession)
	}

	bare := openTest(t, Options{})
	mustApply(t, bare, memory.IndexBatch{Upserts: []*memory.Message{m}, Watermark: 1})
	bare.opts.Texts = nil // as Open leaves it when not given one
	q := memory.SearchQuery{Tenant: "t", Text: "billing", Mode: memory.ModeText, Highlight: true}
	if hits := mustSearch(t, bare, q); len(hits) != 1 || hits[0].Highlight != "" {
		t.Fatalf("without a text source: %+v", hits)
	}
	if hits := mustSearch(t, x, q); len(hits) != 1 || hits[0].Highlight != "We deployed the «billing» service on Friday" {
		t.Fatalf("with one: %+v", hits)
	}
}

// openReader opens a reader of a Bleve index, closed when the test ends.
func openReader(t *testing.T, x bleve.Index) bindex.IndexReader {
	t.Helper()
	adv, err := x.Advanced()
	if err != nil {
		t.Fatal(err)
	}
	r, err := adv.Reader()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
