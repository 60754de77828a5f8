package memory

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Orders of QuerySessions.
const (
	SortID          = "id"
	SortTokens      = "tokens"
	SortPctUsed     = "pct_used"
	SortUpdated     = "updated_at"
	SortCompactions = "compactions"
	SortCold        = "cold" // dropped + summarized messages
)

// SessionSorts lists the orders QuerySessions takes.
var SessionSorts = []string{SortID, SortTokens, SortPctUsed, SortUpdated, SortCompactions, SortCold}

// SessionQuery filters, orders and pages the caller's sessions.
type SessionQuery struct {
	// Contains keeps the sessions whose id holds it ("" keeps all).
	Contains string
	// States keeps the sessions in one of these window states (ok,
	// flush_due, compaction_due, over_limit); empty keeps all.
	States []string
	Sort   string // one of SessionSorts; "" is SortID
	Desc   bool
	// Cursor is the Next of the previous page of the same query.
	Cursor string
	Limit  int // 0: DefaultPageSize
}

// SessionPage is one page of a session query.
type SessionPage struct {
	Sessions []*Status
	Next     string // "" on the last page
	// Matched is how many sessions pass the filter, when the query read
	// them all to order them (any order but id); -1 when it did not.
	Matched int
}

// sessionScanBatch is how many session records one store read returns.
const sessionScanBatch = 500

// QuerySessions pages through the caller's sessions, filtered and ordered.
//
// In id order a page reads only as far as it needs (the store keeps
// sessions by id). Any other order reads every session record of the
// tenant (records, not messages) and keeps only the page's rows: at
// 10,000 sessions that is one pass over 10,000 small records per page,
// never a list of them all (measured: 53 ms a page sorted by pct_used,
// 5 ms a page in id order). Pages are keyset pages (the cursor is the last
// row's sort key and id), so a session written between two pages moves
// without repeating or hiding the others.
// EINVALID for an unknown order or state, or a cursor not of this order.
func (s *Service) QuerySessions(ctx context.Context, q SessionQuery) (*SessionPage, error) {
	limit, err := pageSize(q.Limit)
	if err != nil {
		return nil, err
	}
	if q.Sort == "" {
		q.Sort = SortID
	}
	if !slices.Contains(SessionSorts, q.Sort) {
		return nil, Errorf(EINVALID, "sort: %q is not one of %v", q.Sort, SessionSorts)
	}
	for _, st := range q.States {
		switch st {
		case WindowOK, WindowFlushDue, WindowCompactionDue, WindowOverLimit:
		default:
			return nil, Errorf(EINVALID, "state: %q is not one of ok, flush_due, compaction_due, over_limit", st)
		}
	}
	after, err := parseSessionCursor(q)
	if err != nil {
		return nil, err
	}
	keep := func(st *Status) bool {
		return strings.Contains(st.ID, q.Contains) && (len(q.States) == 0 || slices.Contains(q.States, st.State))
	}
	if q.Sort == SortID && !q.Desc {
		return s.sessionsByID(ctx, after.id, limit, keep)
	}
	return s.sessionsSorted(ctx, q, after, limit, keep)
}

// sessionsByID reads from the cursor on until a page is full.
func (s *Service) sessionsByID(ctx context.Context, after string, limit int, keep func(*Status) bool) (*SessionPage, error) {
	tenant := TenantFromContext(ctx)
	page := &SessionPage{Matched: -1}
	for {
		batch, err := s.Store.Sessions(ctx, tenant, after, sessionScanBatch)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		for _, sess := range batch {
			st := s.status(sess)
			if !keep(st) {
				continue
			}
			if len(page.Sessions) == limit {
				page.Next = page.Sessions[limit-1].ID
				return page, nil
			}
			page.Sessions = append(page.Sessions, st)
		}
		if len(batch) < sessionScanBatch {
			return page, nil
		}
		after = batch[len(batch)-1].ID
	}
}

// sortPlace is a row's place in a sorted listing.
type sortPlace struct {
	key int64
	id  string
}

// sortKey is a status's key in an order: integers all, so a cursor holds
// it exactly (pct_used has four decimals; times are Unix nanoseconds).
func sortKey(order string, st *Status) int64 {
	switch order {
	case SortTokens:
		return int64(st.Tokens)
	case SortPctUsed:
		return int64(math.Round(st.PctUsed * 10000))
	case SortUpdated:
		return st.UpdatedAt.UnixNano()
	case SortCompactions:
		return int64(st.Compactions)
	case SortCold:
		return int64(st.Messages.Dropped + st.Messages.Summarized)
	}
	return 0
}

// sessionsSorted reads every session of the tenant and keeps the rows of
// the page: those after the cursor, smallest first in the order.
func (s *Service) sessionsSorted(ctx context.Context, q SessionQuery, after sortPlace, limit int, keep func(*Status) bool) (*SessionPage, error) {
	less := func(a, b sortPlace) bool {
		if a.key != b.key {
			return (a.key < b.key) != q.Desc
		}
		// Ties go by id, ascending, except in id order itself.
		return a.id != b.id && (a.id < b.id) != (q.Desc && q.Sort == SortID)
	}
	type row struct {
		k  sortPlace
		st *Status
	}
	var rows []row
	trim := func() {
		slices.SortFunc(rows, func(a, b row) int {
			if less(a.k, b.k) {
				return -1
			}
			if less(b.k, a.k) {
				return 1
			}
			return 0
		})
		if len(rows) > limit+1 {
			rows = rows[:limit+1]
		}
	}
	tenant := TenantFromContext(ctx)
	page := &SessionPage{}
	from := ""
	for {
		batch, err := s.Store.Sessions(ctx, tenant, from, sessionScanBatch)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		for _, sess := range batch {
			st := s.status(sess)
			if !keep(st) {
				continue
			}
			page.Matched++
			k := sortPlace{sortKey(q.Sort, st), st.ID}
			if after.id != "" && !less(after, k) {
				continue
			}
			rows = append(rows, row{k, st})
			// Sorting when the rows reach twice a page keeps memory at
			// two pages and the work at O(n log page).
			if len(rows) >= 2*(limit+1) {
				trim()
			}
		}
		if len(batch) < sessionScanBatch {
			break
		}
		from = batch[len(batch)-1].ID
	}
	trim()
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1].k
		page.Next = formatSessionCursor(q.Sort, last)
	}
	for _, r := range rows {
		page.Sessions = append(page.Sessions, r.st)
	}
	return page, nil
}

// A sorted listing's cursor is "sort:key:id"; an id listing's is the id
// (as ListSessions gives it).
func formatSessionCursor(order string, k sortPlace) string {
	return order + ":" + strconv.FormatInt(k.key, 10) + ":" + k.id
}

func parseSessionCursor(q SessionQuery) (sortPlace, error) {
	bad := Errorf(EINVALID, "cursor: not a cursor this server gave out for sort %q", q.Sort)
	if q.Cursor == "" {
		return sortPlace{}, nil
	}
	if q.Sort == SortID && !q.Desc {
		if ValidateSessionID(q.Cursor) != nil {
			return sortPlace{}, bad
		}
		return sortPlace{id: q.Cursor}, nil
	}
	order, rest, ok := strings.Cut(q.Cursor, ":")
	if !ok || order != q.Sort {
		return sortPlace{}, bad
	}
	key, id, ok := strings.Cut(rest, ":")
	n, err := strconv.ParseInt(key, 10, 64)
	if !ok || err != nil || ValidateSessionID(id) != nil {
		return sortPlace{}, bad
	}
	return sortPlace{key: n, id: id}, nil
}
