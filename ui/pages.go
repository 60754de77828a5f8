package ui

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ctxd/ctxd/memory"
)

// pageRows is a listing's page size: a screen or two of rows.
const (
	pageRows    = 50
	maxPageRows = 200
)

// rowsParam reads ?limit= (pageRows when absent).
func rowsParam(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return pageRows, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPageRows {
		return 0, memory.Errorf(memory.EINVALID, "limit: %q is not a number of rows in 1..%d", v, maxPageRows)
	}
	return n, nil
}

type sessionsView struct {
	Page     *memory.SessionPage
	Contains string
	States   []string
	Sort     string
	Desc     bool
	Limit    int
	Cursor   string
	Sorts    []string
	AllState []string
	// Cache is the prompt cache over all the caller's sessions (nil when
	// no gateway answer reported its usage).
	Cache *memory.PromptCache
}

// SortLink is the listing sorted by col: descending first for figures
// (the fullest sessions first), toggled when it is the order already.
func (v sessionsView) SortLink(col string) string {
	q := v.query()
	desc := col != memory.SortID
	if v.Sort == col {
		desc = !v.Desc
	}
	q.Set("sort", col)
	q.Del("desc")
	if desc {
		q.Set("desc", "1")
	}
	return "/ui/?" + q.Encode()
}

// Arrow marks the column the listing is sorted by.
func (v sessionsView) Arrow(col string) string {
	if v.Sort != col {
		return ""
	}
	if v.Desc {
		return " ↓"
	}
	return " ↑"
}

// NextLink is the next page of the same listing.
func (v sessionsView) NextLink() string {
	q := v.query()
	q.Set("sort", v.Sort)
	if v.Desc {
		q.Set("desc", "1")
	}
	q.Set("cursor", v.Page.Next)
	return "/ui/?" + q.Encode()
}

// FirstLink is the first page of the same listing.
func (v sessionsView) FirstLink() string {
	q := v.query()
	q.Set("sort", v.Sort)
	if v.Desc {
		q.Set("desc", "1")
	}
	return "/ui/?" + q.Encode()
}

func (v sessionsView) query() url.Values {
	q := url.Values{}
	if v.Contains != "" {
		q.Set("q", v.Contains)
	}
	for _, s := range v.States {
		q.Add("state", s)
	}
	if v.Limit != pageRows {
		q.Set("limit", strconv.Itoa(v.Limit))
	}
	return q
}

// HasState reports whether the filter holds a window state.
func (v sessionsView) HasState(s string) bool {
	for _, x := range v.States {
		if x == s {
			return true
		}
	}
	return false
}

func (h *Handler) sessionsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := rowsParam(q)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := sessionsView{Contains: strings.TrimSpace(q.Get("q")), States: q["state"], Sort: q.Get("sort"), Desc: q.Get("desc") == "1",
		Limit: limit, Cursor: q.Get("cursor"), Sorts: memory.SessionSorts,
		AllState: []string{memory.WindowOK, memory.WindowFlushDue, memory.WindowCompactionDue, memory.WindowOverLimit}}
	if v.Sort == "" {
		v.Sort = memory.SortID
	}
	v.Page, err = h.svc.QuerySessions(r.Context(), memory.SessionQuery{Contains: v.Contains, States: v.States, Sort: v.Sort,
		Desc: v.Desc, Cursor: v.Cursor, Limit: limit})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if v.Cache, err = h.svc.PromptCacheTotal(r.Context()); err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "sessions", h.newPage(r, "Sessions", "sessions", v))
}

// sessionFor reads the session of the path's {id}, for a session's pages.
func (h *Handler) sessionFor(r *http.Request) (*memory.Status, error) {
	return h.svc.GetSession(r.Context(), r.PathValue("id"))
}

type sessionView struct {
	History     *memory.SessionHistory
	HistoryErr  string
	Compactions []memory.CompactionRecord // newest first, at most maxCompactionRows
	MoreComp    int
	Notes       []*memory.Message
	Window      *windowView
}

const maxCompactionRows = 50

// Timeline is the session's chart.
func (v sessionView) Timeline(st *memory.Status) any {
	if v.History == nil {
		return ""
	}
	return timelineSVG(v.History, st)
}

func (h *Handler) sessionPage(w http.ResponseWriter, r *http.Request) {
	h.renderSession(w, r, nil)
}

// renderSession renders a session's overview, with a window preview when
// one was asked for.
func (h *Handler) renderSession(w http.ResponseWriter, r *http.Request, win *windowView) {
	st, err := h.sessionFor(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := sessionView{Window: win}
	v.History, err = h.svc.SessionHistory(r.Context(), st.ID)
	switch {
	case memory.ErrorCode(err) == memory.EUNAVAILABLE:
		v.HistoryErr = memory.ErrorMessage(err)
	case err != nil:
		h.fail(w, r, err)
		return
	default:
		for i := len(v.History.Compactions) - 1; i >= 0 && len(v.Compactions) < maxCompactionRows; i-- {
			v.Compactions = append(v.Compactions, v.History.Compactions[i])
		}
		v.MoreComp = len(v.History.Compactions) - len(v.Compactions)
	}
	if v.Notes, err = h.svc.PinnedMessages(r.Context(), st.ID); err != nil {
		h.fail(w, r, err)
		return
	}
	p := h.newPage(r, st.ID, "sessions", v)
	p.Session, p.Tab = st, "overview"
	h.render(w, http.StatusOK, "session", p)
}

type listView struct {
	Messages []*memory.Message
	Next     string
	State    string   // messages page: the state filter
	Order    string   // cold page: "oldest", or "" for newest first
	States   []string // the filter's choices
	Back     string   // this page's URL, for the recover button to return to
}

// NextLink is the next page of the listing.
func (v listView) NextLink(base string) string {
	q := url.Values{}
	if v.State != "" {
		q.Set("state", v.State)
	}
	if v.Order != "" {
		q.Set("order", v.Order)
	}
	q.Set("cursor", v.Next)
	return base + "?" + q.Encode()
}

func (h *Handler) coldPage(w http.ResponseWriter, r *http.Request) {
	h.listPage(w, r, "cold", func(st *memory.Status, limit int) ([]*memory.Message, string, error) {
		oldest, err := memory.ParseOrder(r.URL.Query().Get("order"))
		if err != nil {
			return nil, "", err
		}
		return h.svc.ListCold(r.Context(), st.ID, r.URL.Query().Get("cursor"), limit, oldest)
	})
}

func (h *Handler) messagesPage(w http.ResponseWriter, r *http.Request) {
	h.listPage(w, r, "messages", func(st *memory.Status, limit int) ([]*memory.Message, string, error) {
		var states []string
		if s := r.URL.Query().Get("state"); s != "" {
			states = []string{s}
		}
		return h.svc.ListMessages(r.Context(), st.ID, states, r.URL.Query().Get("cursor"), limit)
	})
}

// listPage renders one page of a session's messages (all or cold): the
// store reads a page from the cursor on, whatever the session's length.
func (h *Handler) listPage(w http.ResponseWriter, r *http.Request, name string, list func(*memory.Status, int) ([]*memory.Message, string, error)) {
	st, err := h.sessionFor(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit, err := rowsParam(r.URL.Query())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := listView{State: r.URL.Query().Get("state"), Order: r.URL.Query().Get("order"), Back: r.URL.RequestURI(),
		States: []string{"", string(memory.StateActive), string(memory.StateRecovered), string(memory.StateSummarized), string(memory.StateDropped)}}
	if v.Messages, v.Next, err = list(st, limit); err != nil {
		h.fail(w, r, err)
		return
	}
	p := h.newPage(r, st.ID+" · "+name, "sessions", v)
	p.Session, p.Tab = st, name
	h.render(w, http.StatusOK, name, p)
}

type tuningView struct {
	Tuning *memory.Tuning
	Err    string
	Scope  string // a session id, or "" for all the tenant's sessions
}

// Histogram is the drop-score chart.
func (v tuningView) Histogram() any {
	if v.Tuning == nil {
		return ""
	}
	return histogramSVG(v.Tuning.Drops)
}

func (h *Handler) tuningPage(w http.ResponseWriter, r *http.Request) {
	h.renderTuning(w, r, nil)
}

func (h *Handler) sessionTuningPage(w http.ResponseWriter, r *http.Request) {
	st, err := h.sessionFor(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderTuning(w, r, st)
}

func (h *Handler) renderTuning(w http.ResponseWriter, r *http.Request, st *memory.Status) {
	v := tuningView{}
	title, nav := "Tuning", "tuning"
	if st != nil {
		v.Scope, title, nav = st.ID, st.ID+" · tuning", "sessions"
	}
	var err error
	v.Tuning, err = h.svc.Tuning(r.Context(), v.Scope)
	switch {
	case memory.ErrorCode(err) == memory.EUNAVAILABLE:
		v.Err = memory.ErrorMessage(err)
	case err != nil:
		h.fail(w, r, err)
		return
	}
	p := h.newPage(r, title, nav, v)
	p.Session, p.Tab = st, "tuning"
	h.render(w, http.StatusOK, "tuning", p)
}

type searchView struct {
	Query, Mode, Session string
	K                    int
	Modes                []string
	Results              []searchHit
	Searched             bool
}

// searchHit is one result, with the other versions of the same message
// that matched too folded into it.
type searchHit struct {
	memory.SearchResult
	// Versions is how many earlier versions of this message (or other
	// versions, when the hit is itself an earlier one) also matched.
	Versions int
}

// searchPage shows the search form and, when it has a query, its results.
// The query is in the URL (GET /ui/search?q=...) so a search can be
// bookmarked and shared; the request log leaves the query out (see
// httpapi's redacted URIs) unless content logging is on. A POST of the
// same form (the form of earlier versions) answers the same.
func (h *Handler) searchPage(w http.ResponseWriter, r *http.Request) {
	v := searchView{Mode: memory.ModeHybrid, K: 20, Modes: []string{memory.ModeHybrid, memory.ModeText, memory.ModeVector}}
	if q := r.FormValue("q"); q != "" {
		v.Query, v.Session = q, strings.TrimSpace(r.FormValue("session"))
		if m := r.FormValue("mode"); m != "" {
			v.Mode = m
		}
		if k := r.FormValue("k"); k != "" {
			n, err := strconv.Atoi(k)
			if err != nil {
				h.fail(w, r, memory.Errorf(memory.EINVALID, "k: %q is not a number", k))
				return
			}
			v.K = n
		}
		req := memory.SearchRequest{Query: v.Query, K: v.K, Mode: v.Mode, Neighbors: h.opts.SearchNeighbors}
		if v.Session != "" {
			req.Sessions = []string{v.Session}
		}
		res, err := h.svc.Search(r.Context(), req)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		v.Results, v.Searched = groupVersions(res), true
	}
	h.render(w, http.StatusOK, "search", h.newPage(r, "Search", "search", v))
}

// groupVersions keeps, of the versions of one edited message that matched,
// the best-ranked one, and counts the others on it: an often-edited note
// would otherwise fill the page with its own history.
func groupVersions(res []memory.SearchResult) []searchHit {
	out := make([]searchHit, 0, len(res))
	at := map[string]int{} // a message's id (the current version's) -> its hit in out
	for _, r := range res {
		root := r.ID
		if r.VersionOf != "" {
			root = r.VersionOf
		}
		if i, ok := at[root]; ok {
			out[i].Versions++
			continue
		}
		at[root] = len(out)
		out = append(out, searchHit{SearchResult: r})
	}
	return out
}
