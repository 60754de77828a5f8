// Package mcpserver offers ctxd's memory to agents as Model Context Protocol
// tools (memory_search, memory_save, memory_context, memory_recover,
// memory_get, session_status) and session resources (ctxd://sessions/{id}).
//
// The tools run over a Backend: in the server process a ServiceBackend over
// memory.Service (mounted by httpapi at /mcp), and in `ctxd mcp` a client of
// a running server (stdio). Either way a tool makes the same domain call with
// the same validation as the HTTP API, and a refused call comes back as a
// tool error whose text starts with the API's error code ("not_found: ...").
package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/ctxd/ctxd/internal/version"
	"github.com/ctxd/ctxd/memory"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Backend is what the tools need of ctxd. Each method is scoped to one
// tenant, fixed when the backend is made (a ServiceBackend's Tenant, a
// client's API key), and returns errors carrying memory's codes.
type Backend interface {
	// Search finds messages like POST /v1/search. Neighbors is left 0:
	// the backend applies its server's default.
	Search(ctx context.Context, req memory.SearchRequest) ([]memory.SearchResult, error)
	// Append stores messages at the end of a session (created if new).
	Append(ctx context.Context, session string, msgs []*memory.Message) (*memory.AppendResult, error)
	// Context builds the window for a prompt.
	Context(ctx context.Context, session string, req memory.ContextRequest) (*memory.ContextResult, error)
	// Recover brings a cold message of a session back into its window.
	Recover(ctx context.Context, session, messageID string) (*memory.Message, error)
	// Message reads one message by id, whatever its session.
	Message(ctx context.Context, id string) (*memory.Message, error)
	// Session reads a session's status.
	Session(ctx context.Context, id string) (*memory.Status, error)
	// Sessions lists the caller's sessions a page at a time, in id order,
	// from cursor ("": the first); next is "" after the last page.
	Sessions(ctx context.Context, cursor string, limit int) (sessions []*memory.Status, next string, err error)
}

// Options configures New.
type Options struct {
	// Version is reported to clients in the initialize handshake.
	Version string
	// Logger gets internal errors (their detail never reaches the client).
	Logger *slog.Logger
}

// instructions tell the client's model how the tools fit together.
const instructions = `ctxd is this agent's long-term conversation memory, kept in sessions.
Use memory_search to find what was said or decided before (across all your sessions or one), memory_get to read a message by id,
and memory_recover to bring a message that was compacted out of a session's window back into it.
memory_context builds the best window of a session's messages for the next prompt within a token budget.
Check session_status now and then: when it carries a flush_prompt, the session is about to be compacted, so save the facts,
decisions and preferences you will still need with memory_save (pinned notes stay in every window).
A failed call's text starts with an error code: invalid_request (fix the arguments), not_found, conflict, unavailable (retry later).`

// New builds the MCP server of ctxd's tools and resources over b.
func New(b Backend, o Options) *mcp.Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Version == "" {
		o.Version = version.Get().Version
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "ctxd", Title: "ctxd memory", Version: o.Version},
		&mcp.ServerOptions{Instructions: instructions, Logger: sdkLogs(o.Logger),
			// Tools and resources are all there is: no logging capability.
			Capabilities: &mcp.ServerCapabilities{}})
	t := &tools{b: b, log: o.Logger}
	t.add(s)
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "session", Title: "ctxd session", URITemplate: sessionURITemplate, MIMEType: "application/json",
		Description: "A session's status: its token count against its context window, its state (ok, flush_due, compaction_due, over_limit), the flush prompt when one is due, and how many messages are in each state.",
	}, t.readSession)
	s.AddReceivingMiddleware(codedArgumentErrors, integerStrings, t.listSessions)
	return s
}

// codedArgumentErrors gives a code to the tool errors the SDK makes itself:
// arguments that do not fit a tool's input schema are refused before the
// tool runs, with the SDK's text alone. Every error a tool returns is
// already a *memory.Error (see toolError), so any other is such a refusal.
func codedArgumentErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || !r.IsError {
			return res, err
		}
		var coded *memory.Error
		if cause := r.GetError(); cause != nil && !errors.As(cause, &coded) {
			// The SDK's text names the schema's root twice before the point.
			msg := strings.TrimPrefix(cause.Error(), `validating "arguments": `)
			msg = strings.TrimPrefix(msg, "validating root: ")
			r.Content = []mcp.Content{&mcp.TextContent{Text: memory.EINVALID + ": arguments: " + msg}}
		}
		return r, nil
	}
}

// toolError is err as a tool reports it: the API's code and message, so
// "not_found: message ... does not exist" reads the same as over HTTP.
// Internal errors are logged and described to the client only as such.
func toolError(ctx context.Context, log *slog.Logger, tool string, err error) error {
	code, msg := memory.ErrorCode(err), memory.ErrorMessage(err)
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		code, msg = memory.EUNAVAILABLE, "request cancelled or timed out before it finished"
	case code == memory.EINTERNAL || code == memory.EDAMAGED:
		log.ErrorContext(ctx, "mcp tool failed", "tool", tool, "err", err, "code", code)
	}
	return &memory.Error{Code: code, Message: msg}
}
