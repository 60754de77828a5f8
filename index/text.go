package index

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/truncate"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/scoring"
)

// Field names of the Bleve document.
const (
	fieldSession   = "session_id"
	fieldTenant    = "tenant"
	fieldName      = "name"
	fieldState     = "state"
	fieldKind      = "kind"
	fieldCreatedAt = "created_at"
	fieldText      = "text"
	fieldWhen      = "when"
)

// analyzerName is the prose analyzer. Snowball rather than the "en" analyzer's
// Porter stemmer: Porter keeps "deployment" apart from "deploy".
const analyzerName = "ctxd_en"

// The analyzers of a query's text clause (its words and code names whole)
// and of its parts clause: see codeTokenizer. Their terms are those the
// prose analyzer gives documents.
const (
	queryAnalyzerName = "ctxd_en_query"
	partsAnalyzerName = "ctxd_en_parts"
)

// maxTokenRunes caps the terms the analyzer passes on: a longer token is
// cut to its first maxTokenRunes runes, in documents and queries alike, so
// it is still found by its start. The Snowball stemmer's cost grows with
// the square of a token's length: a message that was one run of a letter
// cost 0.85 s at 25k characters and 298 s at 1 MiB, three quarters of it
// stemming. Cut, each token costs a bounded amount and a message costs in
// proportion to its length. 128 keeps whole any word, hash (a sha256 is 64
// hex digits) or identifier a person would search for.
const maxTokenRunes = 128

// truncateName is the filter that applies maxTokenRunes.
const truncateName = "ctxd_truncate"

// textDoc is what Bleve's mapping indexes for one message; the json tags
// are the field names the mapping declares. Only what searches filter or
// match on: the message id is Bleve's own _id, and the id, role, importance
// and token count that schema 2 also indexed were never queried (they were
// 0.5 of the 1.8 MB of the index of 10 replayed coding-agent runs, stored
// text aside: 2,780 terms for created_at, 5,847 for tokens, a posting per
// id). The prose fields (text, name, when) are not in it: they are per
// tenant (see tenantField) and added by textDocument.
type textDoc struct {
	SessionID string    `json:"session_id"`
	Tenant    string    `json:"tenant"`
	State     string    `json:"state"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
}

func newTextDoc(m *memory.Message) *textDoc {
	return &textDoc{
		SessionID: m.SessionID,
		Tenant:    m.Tenant,
		State:     string(m.State),
		Kind:      m.Kind,
		CreatedAt: m.CreatedAt,
	}
}

// tenantField names a prose field of one tenant's documents. BM25 scores a
// term by statistics of the field it is in: how many documents have it
// (df), how many documents there are, and the field's average length. In
// fields shared by all tenants, tenant B writing a rare word 20 times took
// tenant A's own note with that word from first to last in A's search: A
// could read B's writes from its scores. In fields of its own a tenant's df
// and field length are its own; the document count is set per search (see
// tenantStats). A tenant's text query names only its fields, so it cannot
// match another tenant's documents either, and needs no tenant filter.
func tenantField(field, tenant string) string { return field + "@" + tenant }

// textDocument is the Bleve document of m: the mapped fields of textDoc,
// and the prose fields in m's tenant's names, indexed only. The text is not
// stored: snippets are cut from the store's copy (Options.Texts), as the
// store has the truth anyway (stored, it was 1.1 of the 2.9 MB of the index
// of 10 replayed coding-agent runs). No term vectors: a snippet finds its
// words by analysing the text again (highlight.go), and nothing else reads
// locations. An empty name or time adds no field: it has no terms.
func (x *Index) textDocument(m *memory.Message) (*document.Document, error) {
	im := x.text.Mapping()
	doc := document.NewDocument(m.ID)
	if err := im.MapDocument(doc, newTextDoc(m)); err != nil {
		return nil, err
	}
	an := im.AnalyzerNamed(analyzerName)
	if an == nil {
		return nil, fmt.Errorf("analyzer %s is not in the mapping", analyzerName)
	}
	for _, f := range []struct{ name, value string }{
		{fieldText, messageText(m)},
		{fieldName, m.Name},
		{fieldWhen, whenWords(m.CreatedAt, x.opts.Location)},
	} {
		if f.value != "" {
			doc.AddField(document.NewTextFieldCustom(tenantField(f.name, m.Tenant), nil, []byte(f.value), bindex.IndexField, an))
		}
	}
	return doc, nil
}

// messageText is the searchable text of a message: its content and, for an
// assistant's tool calls, the function names and arguments (an agent searches
// for "what did I pass to deploy_service" as often as for prose).
func messageText(m *memory.Message) string {
	if len(m.ToolCalls) == 0 {
		return m.Content
	}
	var b strings.Builder
	b.WriteString(m.Content)
	for _, tc := range m.ToolCalls {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(tc.Function.Name)
		if tc.Function.Arguments != "" {
			b.WriteByte(' ')
			b.WriteString(tc.Function.Arguments)
		}
	}
	return b.String()
}

// whenWords spells a time the way people ask about it ("7 May 2023 Sunday
// afternoon"): questions name dates in words, and RETRIEVAL.md measured that
// having them in the indexed text helps on LoCoMo's temporal questions.
func whenWords(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return ""
	}
	t = t.In(loc)
	var part string
	switch h := t.Hour(); {
	case h >= 5 && h < 12:
		part = "morning"
	case h >= 12 && h < 17:
		part = "afternoon"
	case h >= 17 && h < 21:
		part = "evening"
	default:
		part = "night"
	}
	return fmt.Sprintf("%d %s %d %s %s", t.Day(), t.Month(), t.Year(), t.Weekday(), part)
}

// newMapping is the index mapping. Changing it changes what is on disk: bump
// schemaVersion so that old indexes are reported as needing a rebuild.
func newMapping() (*mapping.IndexMappingImpl, error) {
	im := bleve.NewIndexMapping()
	err := im.AddCustomTokenFilter(truncateName, map[string]any{"type": truncate.Name, "length": float64(maxTokenRunes)})
	if err != nil {
		return nil, fmt.Errorf("index mapping: %w", err)
	}
	// The cut comes first, so no later filter sees a long token.
	err = im.AddCustomAnalyzer(analyzerName, map[string]any{
		"type":          custom.Name,
		"tokenizer":     codeTokenizerName,
		"token_filters": []string{truncateName, lowercase.Name, en.StopName, en.SnowballStemmerName},
	})
	if err != nil {
		return nil, fmt.Errorf("index mapping: %w", err)
	}
	for name, tokenizer := range map[string]string{queryAnalyzerName: codeQueryName, partsAnalyzerName: codePartsName} {
		err = im.AddCustomAnalyzer(name, map[string]any{
			"type":          custom.Name,
			"tokenizer":     tokenizer,
			"token_filters": []string{truncateName, lowercase.Name, en.StopName, en.SnowballStemmerName},
		})
		if err != nil {
			return nil, fmt.Errorf("index mapping: %w", err)
		}
	}
	im.ScoringModel = bindex.BM25Scoring
	im.DefaultAnalyzer = analyzerName
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false

	keywordField := func(store bool) *mapping.FieldMapping {
		f := bleve.NewKeywordFieldMapping()
		f.Store = store
		f.IncludeTermVectors = false
		f.IncludeInAll = false
		f.DocValues = false
		return f
	}
	// created_at is filtered by range, from its terms: no doc values (see
	// unscored: reading them was slower).
	createdAt := bleve.NewDateTimeFieldMapping()
	createdAt.Store, createdAt.IncludeInAll, createdAt.DocValues = false, false, false

	dm := bleve.NewDocumentStaticMapping()
	// session_id is stored: a text hit needs it and the vector side does not
	// know it for hits it did not find.
	dm.AddFieldMappingsAt(fieldSession, keywordField(true))
	dm.AddFieldMappingsAt(fieldTenant, keywordField(false))
	dm.AddFieldMappingsAt(fieldState, keywordField(false))
	dm.AddFieldMappingsAt(fieldKind, keywordField(false))
	dm.AddFieldMappingsAt(fieldCreatedAt, createdAt)
	// No _all field: nothing queries it, and it would take in the prose
	// fields textDocument adds after the mapping.
	dm.AddSubDocumentMapping("_all", bleve.NewDocumentDisabledMapping())
	im.DefaultMapping = dm
	return im, nil
}

func filterTerm(field, value string) query.Query {
	q := bleve.NewTermQuery(value)
	q.SetField(field)
	return q
}

func filterAnyOf(field string, values []string) query.Query {
	if len(values) == 1 {
		return filterTerm(field, values[0])
	}
	qs := make([]query.Query, len(values))
	for i, v := range values {
		qs[i] = filterTerm(field, v)
	}
	return bleve.NewDisjunctionQuery(qs...)
}

// filterQueries are the conjuncts that scope a search: the optional
// session, state, time, id and no-summary filters. The tenant needs none:
// the text clauses name the tenant's own fields (tenantField).
func filterQueries(q *memory.SearchQuery) []query.Query {
	var fs []query.Query
	if len(q.Sessions) > 0 {
		fs = append(fs, filterAnyOf(fieldSession, q.Sessions))
	}
	if len(q.States) > 0 {
		states := make([]string, len(q.States))
		for i, s := range q.States {
			states[i] = string(s)
		}
		fs = append(fs, filterAnyOf(fieldState, states))
	}
	if dq := dateFilter(q.Since, q.Until); dq != nil {
		fs = append(fs, dq)
	}
	if len(q.IDs) > 0 {
		fs = append(fs, bleve.NewDocIDQuery(q.IDs))
	}
	if q.NoSummaries {
		b := bleve.NewBooleanQuery()
		b.AddMustNot(filterTerm(fieldKind, memory.KindSummary))
		fs = append(fs, b)
	}
	for i, f := range fs {
		fs[i] = unscored{f}
	}
	return fs
}

// dateFilter is the inclusive created_at range since..until (zero: open),
// or nil when it filters nothing. Bleve refuses an end outside the times its
// date field holds (int64 nanoseconds: 1677-12 to 2262-04) and does not
// index a time outside them, so an end beyond that range is open.
func dateFilter(since, until time.Time) query.Query {
	lo, hi := query.MinRFC3339CompatibleTime, query.MaxRFC3339CompatibleTime
	if since.After(hi) || (!until.IsZero() && until.Before(lo)) {
		return bleve.NewMatchNoneQuery()
	}
	if since.Before(lo) {
		since = time.Time{}
	}
	if until.After(hi) {
		until = time.Time{}
	}
	if since.IsZero() && until.IsZero() {
		return nil
	}
	epoch := time.Unix(0, 0)
	if !since.IsZero() && !until.IsZero() && since.Before(epoch) && !until.Before(epoch) {
		// Bleve enumerates a range with both ends set across the epoch (a
		// negative to a positive int64) term by term: -27 s to +33 s took
		// minutes, ignoring the request's context. Each side alone is
		// fast.
		return bleve.NewDisjunctionQuery(dateRange(since, time.Unix(0, -1)), dateRange(epoch, until))
	}
	return dateRange(since, until)
}

func dateRange(since, until time.Time) query.Query {
	incl := true
	dq := bleve.NewDateRangeInclusiveQuery(since, until, &incl, &incl)
	dq.SetField(fieldCreatedAt)
	return dq
}

// scopedQuery is the query for text (q.Text with common terms pruned) in
// q's tenant's fields, restricted by q's filters (see filterQueries).
func (x *Index) scopedQuery(q *memory.SearchQuery, text string, more extraTerms) query.Query {
	fs := filterQueries(q)
	tq := x.textQuery(q, text, more)
	if len(fs) == 0 {
		return tq
	}
	return bleve.NewConjunctionQuery(append([]query.Query{tq}, fs...)...)
}

// unscored runs a filter without scores or term vectors. Inside a
// ConjunctionQuery every conjunct adds to the score, and a session_id term
// scored by its idf would favour small sessions in a cross-session search.
// Unscored, Bleve also folds a disjunction of terms into one bitmap iterator:
// a date range is a disjunction of a hundred or so prefix terms that the
// conjunction would otherwise advance one by one for every candidate. At 100k
// documents, scored, the time filter added ~6 ms p50 to a hybrid search
// (reading created_at from doc values instead cost more: chunk
// decompression); unscored it adds about nothing (BenchmarkSearchMix).
type unscored struct{ query.Query }

func (u unscored) Searcher(ctx context.Context, r bindex.IndexReader, m mapping.IndexMapping, o search.SearcherOptions) (search.Searcher, error) {
	o.Score = bleve.ScoreNone
	o.IncludeTermVectors = false
	return u.Query.Searcher(ctx, r, m, o)
}

// textQuery matches the words of the query against the message text, the
// author's name and the date words ("what did Corinne say in May"), with
// the boosts of Options (see DefaultNameBoost for what they are worth).
//
// Text mode is the literal match: the message's text and name. The date words
// are a field of their own that only a query speaking of time consults
// (scoring.AsksWhen or StatesTime): as content they made "friday" match
// every message written on a Friday.
//
// The name or date clause is left out when none of the words occurs in
// that field: it could not match, but the disjunction of clauses would
// still pay for it on every matching document (a fifth of a search of one
// common word at 100k). Bleve's coordination factor divides by the number of
// clauses, so leaving one out scales every score of the query by the same
// factor, which min-max fusion cancels. A clause of expansions, the words'
// neighbours in meaning (see Options.Expander), joins them when given.
func (x *Index) textQuery(q *memory.SearchQuery, text string, more extraTerms) query.Query {
	tenant := q.Tenant
	clause := func(field string, boost float64) *query.MatchQuery {
		m := bleve.NewMatchQuery(text)
		m.SetField(tenantField(field, tenant))
		m.Analyzer = queryAnalyzerName
		m.SetBoost(boost)
		return m
	}
	qs := []query.Query{clause(fieldText, 1)}
	if x.opts.PartBoost > 0 && hasCodeName(text) {
		m := clause(fieldText, x.opts.PartBoost)
		m.Analyzer = partsAnalyzerName
		qs = append(qs, m)
	}
	if eq := x.expansionQuery(tenant, more.expansions); eq != nil {
		qs = append(qs, eq)
	}
	if fq := feedbackQuery(tenant, more.feedback); fq != nil {
		qs = append(qs, fq)
	}
	whenBoost := 0.0
	if q.Mode != memory.ModeText && (scoring.AsksWhen(q.Text) || scoring.StatesTime(q.Text)) {
		whenBoost = x.opts.WhenBoost
	}
	if x.opts.NameBoost > 0 || whenBoost > 0 {
		occurs := x.fieldsWithAny(tenant, text, fieldName, fieldWhen)
		if x.opts.NameBoost > 0 && occurs[fieldName] {
			qs = append(qs, clause(fieldName, x.opts.NameBoost))
		}
		if whenBoost > 0 && occurs[fieldWhen] {
			qs = append(qs, clause(fieldWhen, whenBoost))
		}
	}
	if len(qs) == 1 {
		return qs[0]
	}
	return bleve.NewDisjunctionQuery(qs...)
}

// fieldsWithAny reports, for each of fields, whether a document of tenant
// has one of the analysed terms of text in it. On any error it says yes: a
// clause too many costs time, one too few would lose matches.
func (x *Index) fieldsWithAny(tenant, text string, fields ...string) map[string]bool {
	out := make(map[string]bool, len(fields))
	all := func() map[string]bool {
		for _, f := range fields {
			out[f] = true
		}
		return out
	}
	cache := x.dfs() // before the reader: see commonFilter
	an := x.text.Mapping().AnalyzerNamed(queryAnalyzerName)
	adv, err := x.text.Advanced()
	if an == nil || err != nil {
		return all()
	}
	r, err := adv.Reader()
	if err != nil {
		return all()
	}
	defer r.Close()
	toks := an.Analyze([]byte(text))
	for _, f := range fields {
		tf := tenantField(f, tenant)
		for _, tok := range toks {
			n, ok := cache.get(tf, tok.Term)
			if !ok {
				tfr, err := r.TermFieldReader(context.Background(), tok.Term, tf, false, false, false)
				if err != nil {
					return all()
				}
				n = tfr.Count()
				_ = tfr.Close()
				cache.put(tf, tok.Term, n)
			}
			if n > 0 {
				out[f] = true
				break
			}
		}
	}
	return out
}

// extraTerms are what the text side matches besides the query's words: the
// words' neighbours in meaning (see Options.Expander) and the feedback
// terms (see feedback.go).
type extraTerms struct {
	expansions []string
	feedback   []FeedbackTerm
}

// textCandidate is one hit of the text side.
type textCandidate struct {
	id    string
	score float64
}

// searchText returns up to n best text hits for q, searching for text (q.Text
// with common terms pruned). It asks Bleve for no term locations even when q
// wants snippets: reading them for every matching posting made a search of
// common words twice as slow, and only the final K hits need them (see
// snippet).
//
// Scores use q's tenant's statistics only (see tenantStats). In an index
// only q's tenant has written to, Bleve's own index-wide statistics are the
// tenant's, and the search uses them; if another tenant's first documents
// arrived meanwhile (noteTenants runs before they are committed), it
// searches again with the tenant's.
func (x *Index) searchText(ctx context.Context, q *memory.SearchQuery, text string, more extraTerms, n int) ([]textCandidate, error) {
	sole := x.soleTenant(q.Tenant)
	if testHookTenancyRead != nil {
		testHookTenancyRead()
	}
	res, err := x.searchScoped(ctx, q, text, more, n, sole)
	if err == nil && sole && !x.soleTenant(q.Tenant) {
		res, err = x.searchScoped(ctx, q, text, more, n, false)
	}
	if err != nil {
		return nil, fmt.Errorf("text search: %w", err)
	}
	out := make([]textCandidate, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = textCandidate{id: h.ID, score: h.Score}
	}
	return out, nil
}

// searchScoped runs the scoped query of q, scored by q's tenant's
// statistics unless indexWide (the index holds only q's tenant).
func (x *Index) searchScoped(ctx context.Context, q *memory.SearchQuery, text string, more extraTerms, n int, indexWide bool) (*bleve.SearchResult, error) {
	req := bleve.NewSearchRequestOptions(x.scopedQuery(q, text, more), n, 0, false)
	if !indexWide {
		stats, err := x.tenantStats(q.Tenant)
		if err != nil {
			return nil, err
		}
		req.PreSearchData = map[string]any{search.BM25PreSearchDataKey: stats}
	}
	return x.text.SearchInContext(ctx, req)
}

// sessionDocIDs lists the ids of every document of one session. It pages with
// SearchAfter so a session of any size is found without deep From offsets.
func (x *Index) sessionDocIDs(ctx context.Context, s memory.SessionRef) ([]string, error) {
	page := sessionPage
	q := bleve.NewConjunctionQuery(filterTerm(fieldTenant, s.Tenant), filterTerm(fieldSession, s.ID))
	var ids []string
	var after []string
	for {
		req := bleve.NewSearchRequestOptions(q, page, 0, false)
		req.SortBy([]string{"_id"})
		req.Score = bleve.ScoreNone
		if after != nil {
			req.SearchAfter = after
		}
		res, err := x.text.SearchInContext(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list session %s/%s: %w", s.Tenant, s.ID, err)
		}
		for _, h := range res.Hits {
			ids = append(ids, h.ID)
		}
		if len(res.Hits) < page {
			return ids, nil
		}
		after = []string{res.Hits[len(res.Hits)-1].ID}
	}
}

// testHookTenancyRead, if set, runs between searchText's reading of the
// tenancy and its search.
var testHookTenancyRead func()

// sessionPage is how many ids one listing query of sessionDocIDs returns; a
// variable so tests can make sessions span pages.
var sessionPage = 5000
