package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/ctxd/ctxd/memory"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionURIPrefix and sessionURITemplate name a session as a resource.
const (
	sessionURIPrefix   = "ctxd://sessions/"
	sessionURITemplate = sessionURIPrefix + "{id}"
)

// SessionURI is the resource URI of a session.
func SessionURI(id string) string { return sessionURIPrefix + url.PathEscape(id) }

// readSession answers resources/read of ctxd://sessions/{id}: the session's
// status as session_status reports it. A session that does not exist (or
// is another tenant's) is the protocol's "resource not found".
func (t *tools) readSession(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, err := url.PathUnescape(strings.TrimPrefix(uri, sessionURIPrefix))
	if err != nil {
		err = memory.Errorf(memory.EINVALID, "not a valid URI: %v", err)
	} else {
		err = memory.ValidateSessionID(id)
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %s", uri, memory.ErrorMessage(err))}
	}
	st, err := t.b.Session(ctx, id)
	if memory.ErrorCode(err) == memory.ENOTFOUND {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, toolError(ctx, t.log, "resource "+uri, err)
	}
	body, err := json.Marshal(toStatus(st))
	if err != nil {
		return nil, fmt.Errorf("encode session %s: %w", id, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(body)}}}, nil
}

// resourcesPage is how many sessions one resources/list page holds.
const resourcesPage = 100

// listSessions answers resources/list with the caller's sessions, a page at
// a time (the protocol's cursor is the API's): a client that lists
// resources finds them, where the template alone named none.
func (t *tools) listSessions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		lr, ok := req.(*mcp.ListResourcesRequest)
		if method != "resources/list" || !ok {
			return next(ctx, method, req)
		}
		cursor := ""
		if lr.Params != nil {
			cursor = lr.Params.Cursor
		}
		sessions, nextCursor, err := t.b.Sessions(ctx, cursor, resourcesPage)
		if memory.ErrorCode(err) == memory.EINVALID {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "cursor: " + memory.ErrorMessage(err)}
		}
		if err != nil {
			return nil, toolError(ctx, t.log, "resources/list", err)
		}
		out := &mcp.ListResourcesResult{NextCursor: nextCursor, Resources: make([]*mcp.Resource, len(sessions))}
		for i, st := range sessions {
			out.Resources[i] = &mcp.Resource{URI: SessionURI(st.ID), Name: st.ID, Title: "session " + st.ID,
				MIMEType:    "application/json",
				Description: fmt.Sprintf("%d of %d tokens, %s", st.Tokens, st.ContextWindow, st.State)}
		}
		return out, nil
	}
}
