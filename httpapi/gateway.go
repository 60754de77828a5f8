package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

// The gateway's model endpoints (POST /v1/chat/completions, POST
// /v1/messages): this file holds what both wire formats share; the domain
// (sessions, what is stored, the window) is memory.Gateway.

// Upstream is one provider the gateway forwards to.
type Upstream struct {
	// URL is the base URL as the provider's SDK takes it (OpenAI's ends in
	// /v1, Anthropic's does not); empty: the endpoint answers 404.
	URL string
	// Key is sent when the caller sends none of its own.
	Key string
}

// GatewayOptions configures the model endpoints.
type GatewayOptions struct {
	OpenAI, Anthropic Upstream
	// Client calls the upstreams; http.DefaultClient when nil. It must not
	// time out a whole answer: a streamed one may take minutes.
	Client *http.Client
	// FlushTurn lets the gateway give the model one turn to save notes
	// before a compaction (see memory.FlushInstruction).
	FlushTurn bool
	// BodyLimit bounds a model call's body; DefaultGatewayBodyLimit when
	// 0 (never under the API's own limit).
	BodyLimit int64
}

// DefaultGatewayBodyLimit is the largest model call accepted: an agent
// resends its whole history on every call, and ctxd's window keeps the
// model from ever telling it to shrink (a 44-step session was 512 KB; a
// 1,000-step one passes 8 MiB).
const DefaultGatewayBodyLimit = 256 << 20

// Gateway headers (declared in api): the session and window asked for,
// and what ctxd did for this call.
const (
	SessionHeader       = api.GatewaySessionHeader
	ContextWindowHeader = api.GatewayContextWindowHeader
	tokensHeader        = api.GatewayTokensHeader
	compactedHeader     = api.GatewayCompactedHeader
	recoveredHeader     = api.GatewayRecoveredHeader
	maxTokensHeader     = api.GatewayMaxTokensHeader
)

// maxUpstreamBody bounds a non-streamed answer read into memory.
const maxUpstreamBody = 64 << 20

// defaultAnswerReserve is kept for the answer when the request sets no
// max_tokens: a quarter of the window at most.
const defaultAnswerReserve = 4096

// wireFormat is what differs between the providers' formats.
type wireFormat interface {
	// window renders the gateway's window as the upstream request's body.
	body(w *memory.GatewayWindow) ([]byte, error)
	// path is the endpoint under the upstream's base URL.
	path() string
	// auth sets the upstream's credentials on out from the caller's in.
	auth(in, out http.Header, key string)
	// answer reads a non-streamed answer, and what the upstream reported
	// of its prompt (zero: nothing).
	answer(body []byte) (*memory.Message, memory.PromptUsage, error)
	// stream returns a reader of a streamed answer's events.
	stream() streamParser
	// flushBody is the flush turn's request: the window, the agent's tools
	// and save_memory, and the flush instruction; never streamed.
	flushBody(w *memory.GatewayWindow) ([]byte, error)
	// notes reads the notes a flush turn's answer saved.
	notes(body []byte) []string
	// stored is told the id of the stored answer (after answer or the
	// stream's end): the Responses API names it by its response id.
	stored(s *Server, tenant, session, answer string)
}

// saveMemorySchema is the input of the save_memory tool, in JSON Schema.
var saveMemorySchema = json.RawMessage(`{"type":"object","properties":{"note":{"type":"string","description":"the note, self-contained"}},"required":["note"]}`)

// flushParts splits an upstream request for the flush turn: its fields,
// its messages (the field key, into messages) and its tools.
func flushParts(body []byte, key string, messages any) (map[string]json.RawMessage, []json.RawMessage, error) {
	var out map[string]json.RawMessage
	var tools []json.RawMessage
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(out[key], messages); err != nil {
		return nil, nil, err
	}
	if t, ok := out["tools"]; ok && string(t) != "null" {
		if err := json.Unmarshal(t, &tools); err != nil {
			return nil, nil, memory.Errorf(memory.EINVALID, "tools: %v", err)
		}
	}
	return out, tools, nil
}

// flushRequest writes the flush turn's request: never streamed, with
// tool_choice left to the model (a client's forced tool would keep it from
// saving notes).
func flushRequest(out map[string]json.RawMessage, key string, messages any, tools []json.RawMessage, choice string) ([]byte, error) {
	var err error
	if out[key], err = json.Marshal(messages); err != nil {
		return nil, err
	}
	if out["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	out["tool_choice"] = json.RawMessage(choice)
	delete(out, "stream")
	return json.Marshal(out)
}

// savedNote reads a save_memory call's input.
func savedNote(input []byte) string {
	var in struct {
		Note string `json:"note"`
	}
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	return in.Note
}

// streamParser accumulates a streamed answer from its SSE data lines.
type streamParser interface {
	// data reads one event's data; done: it ends the answer.
	data(line []byte) (done bool)
	answer() *memory.Message
	// usage is what the upstream reported of the prompt (zero: nothing).
	usage() memory.PromptUsage
}

// gatewayCall is one model call: the domain request, and how to speak to
// the upstream.
type gatewayCall struct {
	req      memory.GatewayRequest
	format   wireFormat
	upstream Upstream
	stream   bool
	query    string // the client's query string, passed on
}

// contextWindow is the window of the call's model: the header, else the
// model table's (at most DefaultGatewayWindow), else 0 (the session's own).
func contextWindow(c echo.Context, model string) (int, error) {
	if h := c.Request().Header.Get(ContextWindowHeader); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 256 || n > 10_000_000 {
			return 0, memory.Errorf(memory.EINVALID, "%s: %q is not a number of tokens in 256..10000000", ContextWindowHeader, h)
		}
		return n, nil
	}
	n, _ := memory.ModelWindow(model)
	return min(n, DefaultGatewayWindow), nil
}

// DefaultGatewayWindow caps the window of a known model when the caller
// names none: with a model's whole 200k or 400k ctxd would pass a coding
// agent's history through untouched for hours, and each call would cost
// all of it. 64,000 holds a coding agent's system prompt and tools (Claude
// Code's are ~20k) with room for its work; X-Ctxd-Context-Window sets any
// other.
const DefaultGatewayWindow = 64_000

// toolsOf is a request's tool definitions as sent ("" for none): ctxd
// counts them, as the upstream will.
func toolsOf(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	return string(raw)
}

// answerReserve is what the answer may take: the request's own limit, else
// defaultAnswerReserve, at most a quarter of the window when the window is
// known.
func answerReserve(limit, window int) int {
	if limit > 0 {
		return limit
	}
	if window > 0 {
		return min(defaultAnswerReserve, window/4)
	}
	return defaultAnswerReserve
}

// serveGateway prepares the window, forwards it, and answers the
// upstream's answer (retrying once, with a smaller window, when the
// upstream says it was too long), storing it.
func (s *Server) serveGateway(c echo.Context, call gatewayCall) error {
	if call.upstream.URL == "" {
		return memory.Errorf(memory.ENOTFOUND, "this endpoint forwards to an upstream model API, and none is configured: set the upstream URL (--upstream-openai-url or --upstream-anthropic-url)")
	}
	ctx := c.Request().Context()
	call.query = c.Request().URL.RawQuery
	var resp *http.Response
	var win *memory.GatewayWindow
	for attempt := 0; attempt < 2; attempt++ {
		call.req.Harder = attempt > 0
		var err error
		if win, err = s.gateway.Prepare(ctx, call.req); err != nil {
			return err
		}
		if win.FlushDue && s.opts.Gateway.FlushTurn && s.flushTurn(ctx, c.Request().Header, call, win) {
			// the notes are pinned: the window to send holds them
			if win, err = s.gateway.Prepare(ctx, call.req); err != nil {
				return err
			}
		}
		body, err := call.format.body(win)
		if err != nil {
			return fmt.Errorf("render the upstream request: %w", err)
		}
		if resp, err = s.forward(ctx, c.Request().Header, call, body); err != nil {
			return err
		}
		if attempt == 0 && resp.StatusCode >= 400 {
			head, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
			resp.Body.Close()
			if err != nil {
				return memory.Errorf(memory.EUNAVAILABLE, "read the upstream's error: %v", err)
			}
			if isOverflow(resp.StatusCode, head) {
				continue
			}
			resp.Body = io.NopCloser(bytes.NewReader(head))
		}
		break
	}
	defer resp.Body.Close()
	h := c.Response().Header()
	copyAnswerHeaders(resp.Header, h)
	h.Set(SessionHeader, win.Session)
	h.Set(tokensHeader, strconv.Itoa(win.Tokens))
	h.Set(compactedHeader, strconv.FormatBool(win.Compacted))
	h.Set(recoveredHeader, strconv.Itoa(win.Recovered))
	if win.AnswerLowered {
		h.Set(maxTokensHeader, strconv.Itoa(win.Answer))
	}
	// The answer is stored even when the client has gone: its request's
	// context is cancelled then, the store must not be.
	keep := context.WithoutCancel(ctx)
	if resp.StatusCode >= 300 {
		c.Response().WriteHeader(resp.StatusCode)
		_, err := io.Copy(c.Response(), resp.Body)
		return ignoreClientGone(err)
	}
	if call.stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return s.relayStream(c, keep, call, win, resp)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
	if err != nil {
		return memory.Errorf(memory.EUNAVAILABLE, "read the upstream's answer: %v", err)
	}
	if ans, usage, err := call.format.answer(body); err != nil {
		s.opts.Logger.Warn("gateway: the upstream's answer could not be read, not stored", "session", win.Session, "err", err)
	} else {
		s.recordUsage(keep, win, usage)
		id, err := s.gateway.StoreAnswer(keep, win.Session, ans)
		if err != nil {
			return err
		}
		call.format.stored(s, memory.TenantFromContext(ctx), win.Session, id)
	}
	c.Response().WriteHeader(resp.StatusCode)
	_, err = c.Response().Write(body)
	return ignoreClientGone(err)
}

// relayStream passes the upstream's events to the client as they come,
// one event at a time, and stores the answer they add up to when the
// stream ends, however it ends (the client gone, the upstream cut).
func (s *Server) relayStream(c echo.Context, keep context.Context, call gatewayCall, win *memory.GatewayWindow, resp *http.Response) error {
	w := c.Response()
	w.WriteHeader(resp.StatusCode)
	w.Flush()
	p := call.format.stream()
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	clientGone, stored := false, false
	store := func() {
		if stored {
			return
		}
		stored = true
		s.recordUsage(keep, win, p.usage())
		id, err := s.gateway.StoreAnswer(keep, win.Session, p.answer())
		if err != nil {
			s.opts.Logger.Error("gateway: store a streamed answer", "session", win.Session, "err", err)
		}
		call.format.stored(s, memory.TenantFromContext(keep), win.Session, id)
	}
	var readErr error
	for {
		line, err := rd.ReadBytes('\n')
		if len(line) > 0 {
			// The last event is passed on after the answer is stored: a
			// client that saw the end of the stream finds it stored.
			if data, ok := bytes.CutPrefix(line, []byte("data:")); ok && p.data(bytes.TrimSpace(data)) {
				store()
			}
			if !clientGone {
				if _, werr := w.Write(line); werr != nil {
					clientGone = true
				} else if len(bytes.TrimSpace(line)) == 0 {
					w.Flush() // the end of one event
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
	}
	if !clientGone {
		w.Flush()
	}
	store() // a stream cut short: what came is stored
	if readErr != nil && !clientGone {
		s.opts.Logger.Warn("gateway: the upstream's stream broke off", "session", win.Session, "err", readErr)
	}
	return nil
}

// recordUsage calibrates the session to the upstream's count and adds the
// answer's prompt cache figures to the session's.
func (s *Server) recordUsage(ctx context.Context, win *memory.GatewayWindow, u memory.PromptUsage) {
	s.gateway.Calibrate(ctx, win.Session, win.Tokens+win.ToolTokens, u.Input)
	if err := s.gateway.RecordUsage(ctx, win.Session, u); err != nil {
		s.opts.Logger.Warn("gateway: record the prompt cache figures", "session", win.Session, "err", err)
	}
}

// flushTurn sends the upstream the flush turn and stores the notes it
// saved; it reports whether any were. Its failures are logged, not
// returned: the client's own call goes on without the notes.
func (s *Server) flushTurn(ctx context.Context, in http.Header, call gatewayCall, win *memory.GatewayWindow) bool {
	s.gateway.Flushed(ctx, win.Session) // a model call, whatever comes of it
	body, err := call.format.flushBody(win)
	if err != nil {
		s.opts.Logger.Warn("gateway: render the flush turn", "session", win.Session, "err", err)
		return false
	}
	call.stream = false
	resp, err := s.forward(ctx, in, call, body)
	if err != nil {
		s.opts.Logger.Warn("gateway: the flush turn failed", "session", win.Session, "err", err)
		return false
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
	if err != nil || resp.StatusCode >= 300 {
		s.opts.Logger.Warn("gateway: the flush turn failed", "session", win.Session, "status", resp.StatusCode, "err", err)
		return false
	}
	notes := call.format.notes(answer)
	if err := s.gateway.SaveNotes(ctx, win.Session, notes); err != nil {
		s.opts.Logger.Warn("gateway: store the flush turn's notes", "session", win.Session, "err", err)
		return false
	}
	return len(notes) > 0
}

// forward sends body to the upstream with the caller's headers that the
// provider reads (its key, API version and beta flags).
func (s *Server) forward(ctx context.Context, in http.Header, call gatewayCall, body []byte) (*http.Response, error) {
	url := strings.TrimSuffix(call.upstream.URL, "/") + call.format.path()
	if call.query != "" {
		url += "?" + call.query // Claude Code's ?beta=true
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build the upstream request: %w", err)
	}
	providerHeaders(in, req.Header)
	req.Header.Set("Content-Type", "application/json")
	if call.stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	call.format.auth(in, req.Header, call.upstream.Key)
	resp, err := s.upstreamClient().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, memory.Errorf(memory.EUNAVAILABLE, "the upstream at %s did not answer: %v", call.upstream.URL, err)
	}
	return resp, nil
}

// isOverflow reports whether an upstream error says the request was longer
// than the model's window, in the words OpenAI, Anthropic and the servers
// that copy them use.
func isOverflow(status int, body []byte) bool {
	if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge {
		return false
	}
	b := strings.ToLower(string(body))
	for _, sign := range []string{"context_length_exceeded", "maximum context length", "prompt is too long", "context window",
		"too many tokens", "exceed context limit", "exceeds context limit", "context limit", "input is too long",
		"context length", "maximum prompt length", "reduce the length of the messages", "too large for model",
		"request_too_large"} { // Anthropic's 413 for a body over its size limit: a smaller window is a smaller body
		if strings.Contains(b, sign) {
			return true
		}
	}
	return false
}

// lowerAnswer writes the window's lowered answer limit into the fields of
// out the client set (and Anthropic's thinking budget under it, which the
// API requires).
func lowerAnswer(out map[string]json.RawMessage, w *memory.GatewayWindow, fields ...string) {
	if !w.AnswerLowered {
		return
	}
	for _, f := range fields {
		if _, ok := out[f]; ok {
			out[f] = json.RawMessage(strconv.Itoa(w.Answer))
		}
	}
	var th map[string]json.RawMessage
	if raw, ok := out["thinking"]; ok && json.Unmarshal(raw, &th) == nil {
		var budget int
		if json.Unmarshal(th["budget_tokens"], &budget) == nil && budget >= w.Answer {
			th["budget_tokens"] = json.RawMessage(strconv.Itoa(max(1024, w.Answer/2)))
			out["thinking"], _ = json.Marshal(th)
		}
	}
}

// ignoreClientGone drops the error of writing to a client that left: the
// answer is stored already and there is no one to tell.
func ignoreClientGone(error) error { return nil }

// textOf reads a content field that is a string or an array of parts:
// text parts joined by newlines, each other part a short marker (its type
// in brackets). ctxd counts a part it cannot read as its marker: an image
// costs the upstream more than that, which the answer reserve absorbs.
func textOf(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var out []string
	for _, p := range parts {
		if p.Type == "text" || p.Type == "input_text" || p.Type == "output_text" {
			out = append(out, p.Text)
		} else {
			out = append(out, "["+p.Type+"]")
		}
	}
	return strings.Join(out, "\n"), nil
}
