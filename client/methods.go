package client

import (
	"context"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/admin"
)

// Health checks that the server process is up (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	_, err := call[api.Health](ctx, c, request{method: http.MethodGet, path: "/healthz", safe: true})
	return err
}

// Ready checks that the store and indexes are open (GET /readyz);
// EUNAVAILABLE while they are not.
func (c *Client) Ready(ctx context.Context) (*api.Ready, error) {
	return call[api.Ready](ctx, c, request{method: http.MethodGet, path: "/readyz", safe: true})
}

// PutSession creates a session or changes its settings, and returns its
// status. in may be nil: a session with the server's defaults.
func (c *Client) PutSession(ctx context.Context, id string, in *api.SessionIn) (*memory.Status, error) {
	if in == nil {
		in = &api.SessionIn{}
	}
	// Putting the same settings twice leaves the same session.
	return call[memory.Status](ctx, c, request{method: http.MethodPut, path: pathOf("sessions", id), body: in, safe: true})
}

// Session is a session's status; ENOTFOUND when there is none.
func (c *Client) Session(ctx context.Context, id string) (*memory.Status, error) {
	return call[memory.Status](ctx, c, request{method: http.MethodGet, path: pathOf("sessions", id), safe: true})
}

// Page chooses a page of a listing: at most Limit items (0: the server's
// default) after Cursor (the previous page's NextCursor; "" the first).
type Page struct {
	Cursor string
	Limit  int
	// Order is the cold listing's: "newest" (the default) or "oldest".
	Order string
}

func (p Page) query() url.Values {
	q := url.Values{}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Order != "" {
		q.Set("order", p.Order)
	}
	return q
}

// ListSessions is one page of the sessions the caller may see.
func (c *Client) ListSessions(ctx context.Context, p Page) (*api.SessionList, error) {
	return call[api.SessionList](ctx, c, request{method: http.MethodGet, path: "/v1/sessions", query: p.query(), safe: true})
}

// Sessions iterates over every session the caller may see, fetching pages
// of pageSize (0: the server's default) as it goes. It stops at the first
// error, which it yields.
func (c *Client) Sessions(ctx context.Context, pageSize int) iter.Seq2[*memory.Status, error] {
	return pages(func(cursor string) ([]*memory.Status, string, error) {
		l, err := c.ListSessions(ctx, Page{Cursor: cursor, Limit: pageSize})
		if err != nil {
			return nil, "", err
		}
		return l.Sessions, l.NextCursor, nil
	})
}

// DeleteSession removes a session and everything of it; ENOTFOUND when
// there is none.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	// Not retried after a 503: a retry of a delete that went through
	// would answer ENOTFOUND.
	return c.do(ctx, request{method: http.MethodDelete, path: pathOf("sessions", id)}, nil)
}

// Append stores msgs at the end of a session (created with the server's
// defaults if new). It is retried after a 503 or no answer only when every
// message carries a MessageID: the server then stores none twice.
func (c *Client) Append(ctx context.Context, session string, msgs []api.MessageIn) (*api.AppendOut, error) {
	return c.AppendIdempotent(ctx, session, "", msgs)
}

// AppendIdempotent is Append with an Idempotency-Key: a write sent again
// with the same key stores nothing and is answered as the first was, so it
// is retried after a 503 or no answer. The same key with other messages is
// ECONFLICT.
func (c *Client) AppendIdempotent(ctx context.Context, session, key string, msgs []api.MessageIn) (*api.AppendOut, error) {
	r := request{method: http.MethodPost, path: pathOf("sessions", session, "messages"),
		body: api.AppendIn{Messages: msgs}, safe: key != "" || allHaveIDs(msgs)}
	if key != "" {
		r.header = http.Header{api.IdempotencyKeyHeader: {key}}
	}
	return call[api.AppendOut](ctx, c, r)
}

func allHaveIDs(msgs []api.MessageIn) bool {
	for _, m := range msgs {
		if m.MessageID == "" {
			return false
		}
	}
	return len(msgs) > 0
}

// MessageQuery chooses messages of a session: those in States (none: the
// server's default, active; "all" every state), one page.
type MessageQuery struct {
	States []string
	Page
}

// ListMessages is one page of a session's messages, oldest first.
func (c *Client) ListMessages(ctx context.Context, session string, q MessageQuery) (*api.MessageList, error) {
	query := q.query()
	for _, s := range q.States {
		query.Add("state", s)
	}
	return call[api.MessageList](ctx, c, request{method: http.MethodGet, path: pathOf("sessions", session, "messages"), query: query, safe: true})
}

// Messages iterates over a session's messages in states (as
// MessageQuery.States), oldest first, a page of pageSize at a time.
func (c *Client) Messages(ctx context.Context, session string, states []string, pageSize int) iter.Seq2[api.Message, error] {
	return pages(func(cursor string) ([]api.Message, string, error) {
		l, err := c.ListMessages(ctx, session, MessageQuery{States: states, Page: Page{Cursor: cursor, Limit: pageSize}})
		if err != nil {
			return nil, "", err
		}
		return l.Messages, l.NextCursor, nil
	})
}

// Message is one of the caller's messages, whatever its session.
func (c *Client) Message(ctx context.Context, id string) (*api.Message, error) {
	return call[api.Message](ctx, c, request{method: http.MethodGet, path: pathOf("messages", id), safe: true})
}

// PatchMessage changes a message's content, pinned, important or metadata
// and returns it as it is now.
func (c *Client) PatchMessage(ctx context.Context, id string, p api.MessagePatch) (*api.Message, error) {
	return call[api.Message](ctx, c, request{method: http.MethodPatch, path: pathOf("messages", id), body: p})
}

// DeleteMessage deletes a message; with group, the tool calls and results
// bound to it too.
func (c *Client) DeleteMessage(ctx context.Context, id string, group bool) error {
	r := request{method: http.MethodDelete, path: pathOf("messages", id)}
	if group {
		r.query = url.Values{"group": {"true"}}
	}
	return c.do(ctx, r, nil)
}

// Search searches the caller's messages, best first.
func (c *Client) Search(ctx context.Context, in api.SearchIn) ([]api.SearchResult, error) {
	// A search changes nothing: safe to send again.
	out, err := call[api.SearchOut](ctx, c, request{method: http.MethodPost, path: "/v1/search", body: in, safe: true})
	if err != nil {
		return nil, err
	}
	return out.Results, nil
}

// Context builds the window for the next prompt, recovering relevant cold
// messages into it. in.Format must be "" or api.FormatCtxd; ContextChat
// asks for the OpenAI form.
func (c *Client) Context(ctx context.Context, session string, in api.ContextIn) (*api.Context, error) {
	return call[api.Context](ctx, c, request{method: http.MethodPost, path: pathOf("sessions", session, "context"), body: in})
}

// ContextChat is Context answering plain chat messages, to send to an
// OpenAI-style API as they are.
func (c *Client) ContextChat(ctx context.Context, session string, in api.ContextIn) (*api.ContextChat, error) {
	in.Format = api.FormatOpenAI
	return call[api.ContextChat](ctx, c, request{method: http.MethodPost, path: pathOf("sessions", session, "context"), body: in})
}

// Compact compacts a session now (or, with DryRun, reports what it would
// do) and returns the report.
func (c *Client) Compact(ctx context.Context, session string, in api.CompactIn) (*memory.CompactionReport, error) {
	return call[memory.CompactionReport](ctx, c, request{method: http.MethodPost, path: pathOf("sessions", session, "compact"), body: in})
}

// ListCold is one page of a session's cold chunks (dropped and summarized
// originals), newest first unless p.Order is "oldest".
func (c *Client) ListCold(ctx context.Context, session string, p Page) (*api.ColdList, error) {
	return call[api.ColdList](ctx, c, request{method: http.MethodGet, path: pathOf("sessions", session, "cold"), query: p.query(), safe: true})
}

// Cold iterates over a session's cold chunks, a page of pageSize at a time,
// in order ("newest", the default for "", or "oldest").
func (c *Client) Cold(ctx context.Context, session string, pageSize int, order string) iter.Seq2[api.ColdChunk, error] {
	return pages(func(cursor string) ([]api.ColdChunk, string, error) {
		l, err := c.ListCold(ctx, session, Page{Cursor: cursor, Limit: pageSize, Order: order})
		if err != nil {
			return nil, "", err
		}
		return l.Chunks, l.NextCursor, nil
	})
}

// Recover puts a dropped or summarized message back into its session's
// working window and returns it; recovering twice is not an error.
func (c *Client) Recover(ctx context.Context, session, messageID string) (*api.Message, error) {
	// Safe to send again: recovering twice is not an error.
	return call[api.Message](ctx, c, request{method: http.MethodPost, path: pathOf("sessions", session, "messages", messageID, "recover"), safe: true})
}

// EventQuery chooses the last N events (0: the server's default, 50) of a
// stream, of one session or ("") every session of the caller.
type EventQuery struct {
	SessionID string
	N         int
}

// Events are the caller's last events of a stream (compaction, drops,
// recoveries, health, purges, edits), oldest first.
func (c *Client) Events(ctx context.Context, stream string, q EventQuery) ([]api.Event, error) {
	query := url.Values{}
	if q.SessionID != "" {
		query.Set("session_id", q.SessionID)
	}
	if q.N != 0 {
		query.Set("n", strconv.Itoa(q.N))
	}
	l, err := call[api.EventList](ctx, c, request{method: http.MethodGet, path: pathOf("events", stream), query: query, safe: true})
	if err != nil {
		return nil, err
	}
	if l.Events == nil {
		l.Events = []api.Event{}
	}
	return l.Events, nil
}

// Export streams an export of one session (o.Session) or of every session
// (o.All) in the format `ctxd import` reads, from one snapshot of the
// store. o.Tenant names another tenant (an admin key's). The caller reads
// the body to its end and closes it; an export that failed mid-way ends
// without its complete trailer, or with a read error.
func (c *Client) Export(ctx context.Context, o admin.ExportOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if o.Session != "" {
		q.Set("session", o.Session)
	}
	if o.All {
		q.Set("all", "true")
	}
	if o.Vectors {
		q.Set("vectors", "true")
	}
	if o.Tenant != "" {
		q.Set("tenant", o.Tenant)
	}
	res, cancel, err := c.send(ctx, request{method: http.MethodGet, path: "/v1/export", query: q, safe: true, stream: true})
	if err != nil {
		return nil, err
	}
	return &cancelBody{ReadCloser: res.Body, cancel: cancel}, nil
}

// cancelBody releases the request's context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// call sends r and decodes a 2xx answer into a new T.
func call[T any](ctx context.Context, c *Client, r request) (*T, error) {
	var out T
	if err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// pages iterates over a listing, fetching the page after each cursor.
func pages[T any](fetch func(cursor string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := ""
		for {
			items, next, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}
