package index

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/search"
	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/ctxd/ctxd/memory"
)

// Snippets: a fragment of about snippetRunes runes of the message text, with
// the matched words between markOpen and markClose.
const (
	snippetRunes = 150
	markOpen     = "«"
	markClose    = "»"
)

// Search returns the best K hits for q, best first. Hybrid (the default) ranks
// candidates of both sides by fused score; it falls back to one side when q
// has only text or only a vector. TextScore and VectorScore are each side's
// score min-max normalised over that side's candidates for this query (0 when
// the side did not find the document); Score is the fused score in hybrid
// mode and the one side's normalised score otherwise. Since and Until are
// inclusive.
func (x *Index) Search(ctx context.Context, q memory.SearchQuery) ([]memory.Hit, error) {
	if x.closed.Load() {
		return nil, errClosed
	}
	if q.Tenant == "" {
		return nil, memory.Errorf(memory.EINVALID, "search: tenant is required")
	}
	k := q.K
	if k <= 0 {
		k = DefaultK
	}
	k = min(k, MaxK)
	useText := strings.TrimSpace(q.Text) != ""
	useVec := len(q.Vector) > 0
	switch q.Mode {
	case memory.ModeText:
		useVec = false
		if !useText {
			return nil, memory.Errorf(memory.EINVALID, "search: text mode needs a query text")
		}
	case memory.ModeVector:
		useText = false
		if !useVec {
			return nil, memory.Errorf(memory.EINVALID, "search: vector mode needs a query vector")
		}
	case memory.ModeHybrid, "":
		if !useText && !useVec {
			return nil, memory.Errorf(memory.EINVALID, "search: a query text or vector is required")
		}
	default:
		return nil, memory.Errorf(memory.EINVALID, "search: mode %q is not one of hybrid, text, vector", q.Mode)
	}
	n := max(x.opts.CandidateFactor*k, x.opts.MinCandidates)
	if q.Candidates > 0 {
		n = max(k, min(q.Candidates, MaxK))
	}

	var ts []textCandidate
	var vs []vectorCandidate
	var terr, verr error
	done := make(chan struct{})
	if useVec {
		go func() {
			defer close(done)
			if verr = x.load.wait(ctx); verr == nil {
				vs, verr = x.vec.search(ctx, &q, n, x.opts.VectorParallelism)
			}
		}()
	} else {
		close(done)
	}
	var text string     // what the text side searched for
	var more extraTerms // and beside it
	if useText {
		text = x.withoutCommonTerms(ctx, q.Tenant, x.boundQuery(q.Text))
		if expands(&q) {
			more.expansions = x.expansionWords(q.Tenant, text)
		}
		more.feedback = x.feedbackOf(&q)
		ts, terr = x.searchText(ctx, &q, text, more, n)
	}
	<-done
	if terr != nil {
		return nil, terr
	}
	if verr != nil {
		return nil, verr
	}

	cs := fuse(ts, vs, &x.opts)
	if len(cs) > k {
		cs = cs[:k]
	}
	if len(q.Sessions) == 1 {
		// Every hit is of that session: a text hit need not be loaded from
		// Bleve to learn it (for a context call's 100 cold candidates, that
		// was a document read and decode each).
		for _, c := range cs {
			if c.session == "" {
				c.session = q.Sessions[0]
			}
		}
	}
	return x.hits(ctx, q.Tenant, cs, q.Highlight, strings.Join(append([]string{text}, more.expansions...), " "), more.feedback)
}

// hits turns the final candidates into memory.Hits, loading what they lack:
// the session of a text-only hit from Bleve (a text hit deleted since the
// search is then left out; a search of one session does not load it: the
// caller resolves hits against the store, which has the truth), and with
// highlight, the text of every hit from Options.Texts, for a snippet that
// marks the words of query.
func (x *Index) hits(ctx context.Context, tenant string, cs []*candidate, highlight bool, query string, feedback []FeedbackTerm) ([]memory.Hit, error) {
	out := make([]memory.Hit, 0, len(cs))
	var r bindex.IndexReader
	defer func() {
		if r != nil {
			_ = r.Close()
		}
	}()
	for _, c := range cs {
		h := memory.Hit{ID: c.id, SessionID: c.session, Score: c.score, TextScore: c.text, VectorScore: c.vector}
		if h.SessionID == "" {
			if r == nil {
				adv, err := x.text.Advanced()
				if err != nil {
					return nil, fmt.Errorf("search: %w", err)
				}
				if r, err = adv.Reader(); err != nil {
					return nil, fmt.Errorf("search: %w", err)
				}
			}
			doc, err := r.Document(c.id)
			if err != nil {
				return nil, fmt.Errorf("search: load %s: %w", c.id, err)
			}
			if doc == nil {
				continue
			}
			doc.VisitFields(func(f bindex.Field) {
				if f.Name() == fieldSession {
					h.SessionID = string(f.Value())
				}
			})
		}
		out = append(out, h)
	}
	if !highlight || x.opts.Texts == nil || len(out) == 0 {
		return out, nil
	}
	return out, x.highlight(ctx, tenant, cs, out, query, feedback)
}

// highlight gives each hit a snippet of its message's text: around the
// words of query for a text hit, the start of it for a hit its vector
// alone found. A message the store no longer has gets none. Each hit is
// also told which of the feedback terms its text has.
func (x *Index) highlight(ctx context.Context, tenant string, cs []*candidate, hits []memory.Hit, query string, feedback []FeedbackTerm) error {
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	msgs, err := x.opts.Texts.MessagesByID(ctx, tenant, ids, false)
	if err != nil {
		return fmt.Errorf("search: load texts to highlight: %w", err)
	}
	texts := make(map[string]string, len(msgs))
	for _, m := range msgs {
		texts[m.ID] = messageText(m)
	}
	textHit := make(map[string]bool, len(cs))
	for _, c := range cs {
		textHit[c.id] = c.textHit
	}
	var terms map[string]bool
	for i := range hits {
		text, ok := texts[hits[i].ID]
		switch {
		case !ok:
		case textHit[hits[i].ID]:
			if terms == nil {
				terms = x.analyzedTerms(query)
				for _, t := range feedback {
					terms[t.Term] = true // marked too: they are why it ranks
				}
			}
			var found search.TermLocationMap
			hits[i].Highlight, found = x.snippetOf(text, terms)
			for _, t := range feedback {
				if found[t.Term] != nil {
					hits[i].Feedback = append(hits[i].Feedback, t.Term)
				}
			}
		default:
			hits[i].Highlight = leadSnippet(text)
		}
	}
	return nil
}

// cleanSnippet folds a fragment's line breaks and runs of spaces into single
// spaces: a snippet is shown on one line.
func cleanSnippet(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// leadSnippet is the start of text, cut at a word boundary, for a hit that
// matched no words (found by its vector only).
func leadSnippet(text string) string {
	text = cleanSnippet(text)
	if utf8.RuneCountInString(text) <= snippetRunes {
		return text
	}
	cut, n := 0, 0
	for i := range text {
		if n == snippetRunes {
			cut = i
			break
		}
		n++
	}
	if sp := strings.LastIndexByte(text[:cut], ' '); sp > cut/2 {
		cut = sp
	}
	return text[:cut] + "…"
}
