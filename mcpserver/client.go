package mcpserver

import (
	"context"
	"errors"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/memory"
)

// ClientBackend is the Backend of `ctxd mcp`: a running server, reached
// through the client package as the tenant of the client's API key. The
// server's refusals come back with its codes (client.Error wraps the
// server's *memory.Error).
type ClientBackend struct {
	Client *client.Client
}

// Search implements Backend. Neighbors is left to the server's default.
func (b *ClientBackend) Search(ctx context.Context, req memory.SearchRequest) ([]memory.SearchResult, error) {
	in := api.SearchIn{Query: req.Query, Sessions: req.Sessions, K: req.K, Mode: req.Mode,
		Since: formatTime(req.Since), Until: formatTime(req.Until)}
	for _, s := range req.States {
		in.States = append(in.States, string(s))
	}
	res, err := b.Client.Search(ctx, in)
	if err != nil {
		return nil, unreachable(err)
	}
	out := make([]memory.SearchResult, len(res))
	for i, r := range res {
		out[i] = memory.SearchResult{Message: fromAPI(&r.Message), Score: r.Score, Highlight: r.Highlight, Via: r.Via}
	}
	return out, nil
}

// Append implements Backend.
func (b *ClientBackend) Append(ctx context.Context, session string, msgs []*memory.Message) (*memory.AppendResult, error) {
	in := make([]api.MessageIn, len(msgs))
	for i, m := range msgs {
		in[i] = api.MessageIn{Role: string(m.Role), Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID,
			ToolCalls: m.ToolCalls, Important: m.Important, Pinned: m.Pinned, Metadata: m.Metadata,
			CreatedAt: formatTime(m.CreatedAt), MessageID: m.ClientID}
	}
	res, err := b.Client.Append(ctx, session, in)
	if err != nil {
		return nil, unreachable(err)
	}
	return &memory.AppendResult{IDs: res.IDs, Tokens: res.Tokens, Session: res.Session, Compaction: res.Compaction}, nil
}

// Context implements Backend.
func (b *ClientBackend) Context(ctx context.Context, session string, req memory.ContextRequest) (*memory.ContextResult, error) {
	in := api.ContextIn{Prompt: req.Prompt, Explain: req.Explain}
	if req.MaxTokens != 0 {
		in.MaxTokens = &req.MaxTokens
	}
	res, err := b.Client.Context(ctx, session, in)
	if err != nil {
		return nil, unreachable(err)
	}
	out := &memory.ContextResult{Messages: make([]memory.WindowMessage, len(res.Messages)), Tokens: res.Tokens,
		Recovered: res.Recovered, AnswerOnly: res.AnswerOnly, Budget: res.Budget}
	for i, m := range res.Messages {
		out.Messages[i] = memory.WindowMessage{Message: fromAPI(&m.Message), Source: m.Source, Score: m.Score,
			Components: m.Components, PruneLevel: m.PruneLevel}
	}
	return out, nil
}

// Recover implements Backend.
func (b *ClientBackend) Recover(ctx context.Context, session, messageID string) (*memory.Message, error) {
	m, err := b.Client.Recover(ctx, session, messageID)
	if err != nil {
		return nil, unreachable(err)
	}
	return fromAPI(m), nil
}

// Message implements Backend.
func (b *ClientBackend) Message(ctx context.Context, id string) (*memory.Message, error) {
	m, err := b.Client.Message(ctx, id)
	if err != nil {
		return nil, unreachable(err)
	}
	return fromAPI(m), nil
}

// Session implements Backend.
func (b *ClientBackend) Session(ctx context.Context, id string) (*memory.Status, error) {
	st, err := b.Client.Session(ctx, id)
	return st, unreachable(err)
}

// Sessions implements Backend.
func (b *ClientBackend) Sessions(ctx context.Context, cursor string, limit int) ([]*memory.Status, string, error) {
	l, err := b.Client.ListSessions(ctx, client.Page{Cursor: cursor, Limit: limit})
	if err != nil {
		return nil, "", unreachable(err)
	}
	return l.Sessions, l.NextCursor, nil
}

// unreachable gives a request that got no answer its code: without it,
// "the server is down" would read as the internal error of a bug.
func unreachable(err error) error {
	var te *client.TransportError
	if errors.As(err, &te) && !errors.Is(err, context.Canceled) {
		return memory.Errorf(memory.EUNAVAILABLE, "no answer from the ctxd server: %v; is `ctxd serve` running there?", te)
	}
	return err
}

func fromAPI(m *api.Message) *memory.Message {
	return &memory.Message{ID: m.ID, SessionID: m.SessionID, Role: m.Role, Content: m.Content, Name: m.Name,
		ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls, Important: m.Important, Pinned: m.Pinned,
		Metadata: m.Metadata, CreatedAt: m.CreatedAt, Tokens: m.Tokens, State: m.State, Kind: m.Kind,
		Sources: m.Sources, ClientID: m.MessageID, Versions: m.Versions, VersionOf: m.VersionOf}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}
