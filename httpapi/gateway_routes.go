package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

// The gateway's routes that carry no conversation (count_tokens, models),
// and the providers' error shapes: a client SDK reads ctxd's refusals on a
// provider route as it reads the provider's own.

// providerError is a refusal with the provider's own code (OpenAI's
// previous_response_not_found), written in the route's provider shape.
type providerError struct {
	status           int
	code, param, msg string
}

func (e *providerError) Error() string { return e.msg }

// providerOf names the provider whose shape a route's errors take: "" for
// ctxd's own routes.
func providerOf(c echo.Context) string {
	switch c.Path() {
	case "/v1/messages", "/v1/messages/count_tokens":
		return "anthropic"
	case "/v1/chat/completions", "/v1/responses", "/v1/responses/compact":
		return "openai"
	case "/v1/models":
		if isAnthropicCaller(c.Request().Header) {
			return "anthropic"
		}
		return "openai"
	}
	return ""
}

// isAnthropicCaller reports whether a request is an Anthropic SDK's: it
// names an API version, or sends its key as Anthropic's SDKs do.
func isAnthropicCaller(h http.Header) bool {
	return h.Get("Anthropic-Version") != "" || h.Get("X-Api-Key") != ""
}

// providerErrorBody is an error in the provider's shape. ctxd's own code
// stays in code, so ctxd's client reads it as it reads ctxd's errors.
func providerErrorBody(provider string, status int, code, msg string, pe *providerError) any {
	if provider == "anthropic" {
		typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
			404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}[status]
		if typ == "" {
			typ = "invalid_request_error"
			if status >= 500 {
				typ = "api_error"
			}
		}
		return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg, "code": code}}
	}
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	var param any
	if pe != nil && pe.param != "" {
		param = pe.param
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": param, "code": code}}
}

// countTokens forwards POST /v1/messages/count_tokens to the Anthropic
// upstream: the count of the client's request as the provider counts it.
// A fake answer ({"input_tokens": 0}) would silently turn off a client's
// own compaction; an upstream without the route answers its 404, which
// clients handle.
func (s *Server) countTokens(c echo.Context) error {
	body, err := readBody(c.Request())
	if err != nil {
		return memory.Errorf(memory.EINVALID, "read the request body: %v", err)
	}
	return s.relayPlain(c, s.opts.Gateway.Anthropic, http.MethodPost, "/v1/messages/count_tokens", body, &anthropicFormat{})
}

// models forwards GET /v1/models to the provider the caller speaks to:
// Anthropic's when it sends Anthropic's headers, else OpenAI's.
func (s *Server) models(c echo.Context) error {
	if isAnthropicCaller(c.Request().Header) {
		return s.relayPlain(c, s.opts.Gateway.Anthropic, http.MethodGet, "/v1/models", nil, &anthropicFormat{})
	}
	return s.relayPlain(c, s.opts.Gateway.OpenAI, http.MethodGet, "/models", nil, &openaiFormat{})
}

// relayPlain forwards a request that stores nothing and answers the
// upstream's answer as it came.
func (s *Server) relayPlain(c echo.Context, up Upstream, method, path string, body []byte, f wireFormat) error {
	if up.URL == "" {
		return memory.Errorf(memory.ENOTFOUND, "this endpoint forwards to an upstream model API, and none is configured: set the upstream URL (--upstream-openai-url or --upstream-anthropic-url)")
	}
	r := c.Request()
	url := strings.TrimSuffix(up.URL, "/") + path
	if r.URL.RawQuery != "" {
		url += "?" + r.URL.RawQuery
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, url, rd)
	if err != nil {
		return memory.Errorf(memory.EINVALID, "build the upstream request: %v", err)
	}
	providerHeaders(r.Header, req.Header)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	f.auth(r.Header, req.Header, up.Key)
	resp, err := s.upstreamClient().Do(req)
	if err != nil {
		if r.Context().Err() != nil {
			return r.Context().Err()
		}
		return memory.Errorf(memory.EUNAVAILABLE, "the upstream at %s did not answer: %v", up.URL, err)
	}
	defer resp.Body.Close()
	copyAnswerHeaders(resp.Header, c.Response().Header())
	c.Response().WriteHeader(resp.StatusCode)
	_, err = io.Copy(c.Response(), io.LimitReader(resp.Body, maxUpstreamBody))
	return ignoreClientGone(err)
}

// providerHeaders copies the caller's headers that the provider reads (its
// API version, beta flags, organisation and project) to out.
func providerHeaders(in, out http.Header) {
	for k, vs := range in {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "openai-") || strings.HasPrefix(lk, "anthropic-") {
			out[k] = vs
		}
	}
}

// copyAnswerHeaders passes the upstream's answer headers (its request id,
// rate limits) to the client, but for the hop-by-hop ones.
func copyAnswerHeaders(in, out http.Header) {
	for k, vs := range in {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Connection", "Transfer-Encoding", "Keep-Alive":
		default:
			out[k] = vs
		}
	}
}

func (s *Server) upstreamClient() *http.Client {
	if s.opts.Gateway.Client != nil {
		return s.opts.Gateway.Client
	}
	return http.DefaultClient
}
