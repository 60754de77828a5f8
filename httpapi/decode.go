package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/ctxd/ctxd/memory"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"
)

// limitBody refuses an oversized body from its Content-Length, before reading
// it, caps what is read when the length is not declared, and holds the body's
// share of the bytes-in-flight budget until the answer starts.
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return s.limitBodyTo(s.opts.BodyLimit)(next)
}

// limitBodyTo is limitBody with its own limit (the gateway's: an agent
// resends its whole history on every call).
func (s *Server) limitBodyTo(limit int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return s.limitedBody(next, limit)
	}
}

func (s *Server) limitedBody(next echo.HandlerFunc, limit int64) echo.HandlerFunc {
	return func(c echo.Context) error {
		release, err := s.takeBodyUpTo(c.Response(), c.Request(), limit)
		if err != nil {
			return err
		}
		// Given back when the answer's header goes, not when the handler
		// returns: a client may send its next call as soon as it has the
		// answer, before this goroutine runs again, and an agent whose
		// history is over half the budget was told 503 on its own next
		// call (the 1,000-step session at call 945, 8.4 MB bodies).
		release = sync.OnceFunc(release)
		c.Response().Before(release)
		defer release()
		return next(c)
	}
}

// takeBody is limitBody for a request already admitted: it refuses a body
// over the limit or the budget, caps what is read, and returns what gives
// the body's share back. Only admitted requests take a share, so a client
// without a key cannot hold the budget others need.
func (s *Server) takeBody(w http.ResponseWriter, r *http.Request) (release func(), err error) {
	return s.takeBodyUpTo(w, r, s.opts.BodyLimit)
}

// takeBodyUpTo is takeBody with its own limit (the gateway's: an agent
// resends its whole history on every call).
func (s *Server) takeBodyUpTo(w http.ResponseWriter, r *http.Request, limit int64) (release func(), err error) {
	if r.ContentLength > limit {
		return nil, memory.Errorf(memory.ETOOLARGE, "request body of %d bytes is over the limit of %d; send fewer messages per call", r.ContentLength, limit)
	}
	// A body of unknown length (chunked) may grow to the limit; it weighs
	// no more than the API's own limit in the in-flight budget.
	weight := r.ContentLength
	if weight < 0 {
		weight = min(limit, s.opts.BodyLimit)
	}
	release = func() {}
	if s.bodies != nil && weight > 0 {
		if !s.bodies.take(weight) {
			w.Header().Set("Retry-After", "1")
			return nil, s.bodies.errBusy(weight)
		}
		release = func() { s.bodies.give(weight) }
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	return release, nil
}

// readBody reads the whole body. With its length declared it reads into
// one buffer of that size: io.ReadAll grows by doubling, which for a 7 MiB
// body allocated 14 MiB and held up to twice the body at once.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(r.Body)
	}
	body := make([]byte, r.ContentLength)
	n, err := io.ReadFull(r.Body, body)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("body ends after %d of its %d declared bytes", n, r.ContentLength)
	}
	return body, err
}

// bodyError is the answer to a body that could not be read.
func (s *Server) bodyError(err error) error {
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return memory.Errorf(memory.ETOOLARGE, "request body is over the limit of %d bytes; send fewer messages per call", s.opts.BodyLimit)
	case errors.As(err, &netErr) && netErr.Timeout():
		// The connection's read deadline (--read-timeout) passed mid-body: a
		// client sending slowly, or one that stopped before its
		// Content-Length. It answers 408 and net/http closes the connection.
		return errReadTimeout(s.opts.ReadTimeout)
	}
	return memory.Errorf(memory.EINVALID, "read request body: %v", err)
}

// decode reads a JSON body into v. It refuses invalid UTF-8 (Go's decoder
// would silently replace it, changing what the client sent), duplicate
// members and trailing data.
func (s *Server) decode(c echo.Context, v any) error {
	return s.decodeBody(c, v, false)
}

// decodeStrict is decode refusing a field v does not have, as PATCH does:
// on a write, an ignored typo ("pined") would be answered as if it took
// effect. The reads and PUT /v1/sessions/{id} stay lenient: a client may PUT
// back the status it read (its counts and times are not settings).
func (s *Server) decodeStrict(c echo.Context, v any) error {
	return s.decodeBody(c, v, true)
}

func (s *Server) decodeBody(c echo.Context, v any, strict bool) error {
	body, err := readBody(c.Request())
	if err != nil {
		return s.bodyError(err)
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return memory.Errorf(memory.EINVALID, "request body is empty: send a JSON object")
	}
	// Go decodes null (and nothing else but an object) into a struct as
	// "no fields set": a null body would compact, or reset, with defaults.
	if trimmed[0] != '{' {
		return memory.Errorf(memory.EINVALID, "request body must be a JSON object")
	}
	if err := checkJSONText(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return memory.Errorf(memory.EINVALID, "request body has data after the JSON object")
	}
	return nil
}

// checkJSONText refuses a body whose text Go's decoder would read as
// something other than what was sent: invalid UTF-8 and a lone surrogate
// escape (both silently become U+FFFD) and an object naming a member twice
// (the last silently wins: {"role":"user","role":"system"} is a system
// message). The API and the gateway share it, so one rule holds on both.
func checkJSONText(body []byte) error {
	if !utf8.Valid(body) {
		return memory.Errorf(memory.EINVALID, "request body is not valid UTF-8")
	}
	if loneSurrogate(body) {
		return memory.Errorf(memory.EINVALID, "request body escapes a lone UTF-16 surrogate (\\ud800 without its pair): send valid Unicode")
	}
	// jsontext checks names for duplicates as it reads (RFC 7493); the
	// other errors it finds are left to the decoder, whose messages the
	// clients already know.
	err := jsontext.NewDecoder(bytes.NewReader(body)).SkipValue()
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName) {
		name := syn.JSONPointer.LastToken()
		at := string(syn.JSONPointer.Parent())
		if at == "" {
			at = "the body"
		}
		return memory.Errorf(memory.EINVALID, "duplicate member %q in %s: send each member once", name, at)
	}
	return nil
}

// loneSurrogate reports whether a JSON text escapes half of a UTF-16
// surrogate pair. Go's decoder turns one into U+FFFD, silently changing what
// the client sent, as it would invalid UTF-8. Outside strings a backslash is
// a syntax error, so scanning escapes without tracking strings is enough.
func loneSurrogate(body []byte) bool {
	for i := 0; i+1 < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		i++ // the escaped byte: an escaped backslash is passed over whole
		if body[i] != 'u' {
			continue
		}
		r, ok := hex4(body[i+1:])
		if !ok {
			continue
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true // a low half with no high half before it
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 >= len(body) || body[i+1] != '\\' || body[i+2] != 'u' {
				return true
			}
			lo, ok := hex4(body[i+3:])
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return memory.Errorf(memory.EINVALID, "malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return memory.Errorf(memory.EINVALID, "%s: expected %s, got JSON %s", field, typ.Type, typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return memory.Errorf(memory.EINVALID, "malformed JSON: body ends early")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no type for it; the text is its documented form.
		return memory.Errorf(memory.EINVALID, "%s is not a field of this write: it takes {\"messages\": [...]}, each message role, content, name, tool_call_id, tool_calls, important, pinned, metadata, created_at, message_id", strings.TrimPrefix(err.Error(), "json: "))
	}
	return memory.Errorf(memory.EINVALID, "malformed JSON: %v", err)
}

// sessionID reads the :id path parameter.
func sessionID(c echo.Context) (string, error) {
	return pathParam(c, "id")
}

// pathParam decodes a path parameter exactly once. Echo routes on the
// escaped path, and hands params over still escaped, only when the URL holds
// escapes Go would not write itself (RawPath set: %2F); otherwise the param
// is decoded already, and decoding it again would let /v1/sessions/%2573
// name session "s".
func pathParam(c echo.Context, name string) (string, error) {
	raw := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return raw, nil
	}
	v, err := url.PathUnescape(raw)
	if err != nil {
		return "", memory.Errorf(memory.EINVALID, "%s: %q is not a valid path segment", name, raw)
	}
	return v, nil
}

func queryInt(c echo.Context, name string) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, memory.Errorf(memory.EINVALID, "%s: %q is not an integer", name, v)
	}
	return n, nil
}

func queryBool(c echo.Context, name string) (bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, memory.Errorf(memory.EINVALID, "%s: %q is not true or false", name, v)
	}
	return b, nil
}

// numberValue turns a decoded json.Number into an int64 or float64, so
// metadata comes back out as the number that went in.
func numberValue(n json.Number) (any, error) {
	if i, err := n.Int64(); err == nil {
		return i, nil
	}
	f, err := n.Float64()
	if err != nil {
		return nil, fmt.Errorf("number %s out of range", n)
	}
	return f, nil
}
