package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ctxd/ctxd/api"
)

// GatewayCall is one model call through ctxd's drop-in gateway: the
// provider's own request, which ctxd forwards to the upstream it was
// started with after replacing the history with its window (README: "Use
// ctxd with any OpenAI- or Anthropic-compatible agent").
type GatewayCall struct {
	// Session names the session (X-Ctxd-Session); "": ctxd derives it
	// from the request's user field, else the conversation's start.
	Session string
	// ContextWindow is the model's window in tokens
	// (X-Ctxd-Context-Window); 0: the window of a model ctxd knows, else
	// the session's.
	ContextWindow int
	// ProviderKey goes to the upstream as is (Authorization: Bearer for
	// OpenAI, x-api-key for Anthropic); "": the server's
	// CTXD_UPSTREAM_*_API_KEY. The client's own API key goes in
	// X-Ctxd-Key.
	ProviderKey string
	// Body is the provider's request, JSON ("stream": true for a stream).
	Body json.RawMessage
}

// GatewayAnswer is the upstream's answer, unread, and what ctxd did. A
// stream comes as the upstream sends it, event by event; the caller reads
// Body and closes it. An upstream error (a 4xx or 5xx in the provider's
// own shape) is an answer too: check StatusCode.
type GatewayAnswer struct {
	*http.Response
	Session   string // the session the call was stored in
	Tokens    int    // the window's cost, in ctxd's count
	Compacted bool   // a compaction ran during the call
	Recovered int    // cold messages brought back into the window
}

// ChatCompletions sends an OpenAI Chat Completions request through the
// gateway (POST /v1/chat/completions). ctxd's own refusals (no upstream
// configured, a bad header, no key) are *Error as elsewhere. Never
// retried: a model call is not free, nor the same twice.
func (c *Client) ChatCompletions(ctx context.Context, call GatewayCall) (*GatewayAnswer, error) {
	h := http.Header{}
	if call.ProviderKey != "" {
		h.Set("Authorization", "Bearer "+call.ProviderKey)
	}
	return c.gateway(ctx, "/v1/chat/completions", call, h)
}

// AnthropicMessages sends an Anthropic Messages request through the
// gateway (POST /v1/messages), as ChatCompletions does.
func (c *Client) AnthropicMessages(ctx context.Context, call GatewayCall) (*GatewayAnswer, error) {
	h := http.Header{"Anthropic-Version": {"2023-06-01"}}
	if call.ProviderKey != "" {
		h.Set("X-Api-Key", call.ProviderKey)
	}
	return c.gateway(ctx, "/v1/messages", call, h)
}

func (c *Client) gateway(ctx context.Context, path string, call GatewayCall, h http.Header) (*GatewayAnswer, error) {
	if !json.Valid(call.Body) {
		return nil, fmt.Errorf("ctxd client: %s: the request body is not JSON", path)
	}
	if call.Session != "" {
		h.Set(api.GatewaySessionHeader, call.Session)
	}
	if call.ContextWindow != 0 {
		h.Set(api.GatewayContextWindowHeader, strconv.Itoa(call.ContextWindow))
	}
	res, cancel, err := c.send(ctx, request{method: http.MethodPost, path: path, body: call.Body, header: h,
		gateway: true, stream: true})
	if err != nil {
		return nil, err
	}
	res.Body = &cancelBody{ReadCloser: res.Body, cancel: cancel}
	a := &GatewayAnswer{Response: res, Session: res.Header.Get(api.GatewaySessionHeader)}
	a.Tokens, _ = strconv.Atoi(res.Header.Get(api.GatewayTokensHeader))
	a.Compacted, _ = strconv.ParseBool(res.Header.Get(api.GatewayCompactedHeader))
	a.Recovered, _ = strconv.Atoi(res.Header.Get(api.GatewayRecoveredHeader))
	return a, nil
}
