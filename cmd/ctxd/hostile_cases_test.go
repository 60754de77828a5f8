package main

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// bodyField is one field of one request body, for the generated rows.
type bodyField struct {
	route string // "METHOD path"
	base  any    // a valid body holding the field
	path  string // spliceJSON path
	kind  string // str, int, float, bool, arr, obj
	// text fields hold free text, where the domain refuses a NUL as such
	// (an enum-like field refuses it as an unknown value).
	text bool
}

var (
	userBody   = map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	callBody   = map[string]any{"messages": []any{map[string]any{"role": "assistant", "content": "x", "tool_calls": []any{map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}}}}}
	resultBody = map[string]any{"messages": []any{map[string]any{"role": "tool", "tool_call_id": "c", "content": "r"}}}
	searchBody = map[string]any{"query": "train", "sessions": []any{"s"}, "states": []any{"active"}}
)

const (
	putRoute     = "PUT /v1/sessions/h1"
	appendRoute  = "POST /v1/sessions/s/messages"
	searchRoute  = "POST /v1/search"
	compactRoute = "POST /v1/sessions/s/compact"
	contextRoute = "POST /v1/sessions/s/context"
)

// bodyFields lists every field of every request body of API.md (and the
// session's policy overrides, which PUT also takes).
func bodyFields() []bodyField {
	fs := []bodyField{
		{putRoute, map[string]any{}, "context_window", "int", false},
		{putRoute, map[string]any{}, "encoding", "str", false},
		{putRoute, map[string]any{}, "metadata", "obj", false},
		{appendRoute, userBody, "messages", "arr", false},
		{appendRoute, userBody, "messages.0", "obj", false},
		{appendRoute, userBody, "messages.0.role", "str", false},
		{appendRoute, userBody, "messages.0.content", "str", true},
		{appendRoute, userBody, "messages.0.name", "str", true},
		{appendRoute, resultBody, "messages.0.tool_call_id", "str", true},
		{appendRoute, callBody, "messages.0.tool_calls", "arr", false},
		{appendRoute, callBody, "messages.0.tool_calls.0", "obj", false},
		{appendRoute, callBody, "messages.0.tool_calls.0.id", "str", true},
		{appendRoute, callBody, "messages.0.tool_calls.0.type", "str", true},
		{appendRoute, callBody, "messages.0.tool_calls.0.function", "obj", false},
		{appendRoute, callBody, "messages.0.tool_calls.0.function.name", "str", true},
		{appendRoute, callBody, "messages.0.tool_calls.0.function.arguments", "str", true},
		{appendRoute, userBody, "messages.0.important", "bool", false},
		{appendRoute, userBody, "messages.0.pinned", "bool", false},
		{appendRoute, userBody, "messages.0.metadata", "obj", false},
		{appendRoute, userBody, "messages.0.metadata.k", "str", true},
		{appendRoute, userBody, "messages.0.created_at", "str", false},
		{appendRoute, userBody, "messages.0.message_id", "str", true},
		{searchRoute, searchBody, "query", "str", true},
		{searchRoute, searchBody, "session_id", "str", false},
		{searchRoute, searchBody, "sessions", "arr", false},
		{searchRoute, searchBody, "sessions.0", "str", false},
		{searchRoute, searchBody, "k", "int", false},
		{searchRoute, searchBody, "mode", "str", false},
		{searchRoute, searchBody, "states", "arr", false},
		{searchRoute, searchBody, "states.0", "str", false},
		{searchRoute, searchBody, "since", "str", false},
		{searchRoute, searchBody, "until", "str", false},
		{searchRoute, searchBody, "neighbors", "int", false},
		{compactRoute, map[string]any{"dry_run": true}, "prompt", "str", true},
		{compactRoute, map[string]any{"dry_run": true}, "dry_run", "bool", false},
		{contextRoute, map[string]any{"prompt": "train"}, "prompt", "str", true},
		{contextRoute, map[string]any{"prompt": "train"}, "max_tokens", "int", false},
		{contextRoute, map[string]any{"prompt": "train"}, "explain", "bool", false},
		{contextRoute, map[string]any{"prompt": "train"}, "format", "str", false},
	}
	for _, f := range []string{"compaction_trigger_pct", "max_context_pct", "target_pct", "relevance_cutoff",
		"weight_similarity", "weight_recency", "weight_references", "weight_importance", "recency_half_life_turns", "pinned_max_pct"} {
		fs = append(fs, bodyField{putRoute, map[string]any{}, f, "float", false})
	}
	for _, f := range []string{"reserve_tokens", "flush_threshold_tokens", "min_chunks_to_keep", "keep_recent",
		"recoverable_for_days", "summary_target_tokens", "tool_trim_chars", "tool_keep_head_chars",
		"tool_keep_tail_chars", "tool_trim_after_turns", "tool_clear_after_turns"} {
		fs = append(fs, bodyField{putRoute, map[string]any{}, f, "int", false})
	}
	return fs
}

// wrongTypes are JSON values of every other type (and numbers no Go int or
// float holds) for each kind of field.
var wrongTypes = map[string][]string{
	"str":   {`1`, `true`, `{}`, `[]`, `1.5`},
	"int":   {`"1"`, `true`, `{}`, `[]`, `1.5`, `1e400`, `99999999999999999999`, `-99999999999999999999`},
	"float": {`"0.5"`, `true`, `{}`, `[]`, `1e400`, `-1e400`},
	"bool":  {`"true"`, `1`, `{}`, `[]`, `0`},
	"arr":   {`"x"`, `1`, `{}`, `true`},
	"obj":   {`"x"`, `1`, `[]`, `true`},
}

// leaf is the field name an error about path should mention.
func leaf(path string) string {
	parts := strings.Split(path, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		if _, err := strconv.Atoi(parts[i]); err != nil {
			return parts[i]
		}
	}
	return path
}

func split(route string) (string, string) {
	m, p, _ := strings.Cut(route, " ")
	return m, p
}

// fieldCases: every wrong type in every field, and invalid UTF-8, lone
// UTF-16 surrogates and NULs in every string field.
func fieldCases() []hostileCase {
	var out []hostileCase
	for _, f := range bodyFields() {
		m, p := split(f.route)
		for _, w := range wrongTypes[f.kind] {
			if f.path == "messages.0.metadata.k" {
				continue // any scalar is a valid metadata value; see structureCases
			}
			out = append(out, hostileCase{fmt.Sprintf("%s %s=%s", f.route, f.path, w), m, p,
				spliceJSON(f.base, f.path, w), 400, "invalid_request", leaf(f.path)})
		}
		if f.kind != "str" {
			continue
		}
		out = append(out,
			hostileCase{f.route + " " + f.path + " invalid utf-8", m, p, []byte(spliceJSON(f.base, f.path, "\"bad \xff\xfe bytes\"")), 400, "invalid_request", "UTF-8"},
			hostileCase{f.route + " " + f.path + " overlong utf-8", m, p, []byte(spliceJSON(f.base, f.path, "\"\xc0\xaf\"")), 400, "invalid_request", "UTF-8"},
			hostileCase{f.route + " " + f.path + " lone high surrogate", m, p, spliceJSON(f.base, f.path, `"a\ud800b"`), 400, "invalid_request", "surrogate"},
			hostileCase{f.route + " " + f.path + " lone low surrogate", m, p, spliceJSON(f.base, f.path, `"\udc00"`), 400, "invalid_request", "surrogate"},
			hostileCase{f.route + " " + f.path + " reversed surrogates", m, p, spliceJSON(f.base, f.path, `"\udc00\ud83d"`), 400, "invalid_request", "surrogate"},
			hostileCase{f.route + " " + f.path + " raw NUL byte", m, p, []byte(spliceJSON(f.base, f.path, "\"a\x00b\"")), 400, "invalid_request", ""},
			hostileCase{f.route + " " + f.path + " raw newline", m, p, []byte(spliceJSON(f.base, f.path, "\"a\nb\"")), 400, "invalid_request", ""},
		)
		nul := ""
		if f.text {
			nul = "NUL"
		}
		out = append(out, hostileCase{f.route + " " + f.path + " escaped NUL", m, p, spliceJSON(f.base, f.path, `"a\u0000b"`), 400, "invalid_request", nul})
	}
	// The whole body of the wrong type.
	for _, route := range []string{putRoute, appendRoute, searchRoute, compactRoute, contextRoute} {
		m, p := split(route)
		for _, b := range []string{`null`, `[]`, `[{}]`, `"x"`, `1`, `true`, `{}{}`, `{"a":1}x`, "\xef\xbb\xbf{}", `{`, `}`, `{"messages":[}`, `{'a':1}`, `{"a":1,}`, `{"a" 1}`, `/* c */ {}`, `NaN`, `{"k":NaN}`, `{"k":Infinity}`, strings.Repeat(" ", 1<<20)} {
			out = append(out, hostileCase{fmt.Sprintf("%s body %.20q", route, b), m, p, b, 400, "invalid_request", ""})
		}
	}
	return out
}

// idCases: hostile session ids (as they appear in the URL) on every route
// that takes one, each with an otherwise valid request.
func idCases(seed hostileSeed) []hostileCase {
	ids := []string{
		"..", ".", "%2E%2E", "%2e", ".hidden", "..%2F..%2Fetc", "a%2Fb", "%2F", "a%5Cb", "%00", "a%00b", "s%00",
		strings.Repeat("x", 129), strings.Repeat("%41", 129), "%C3%A9t%C3%A9", "%E2%80%AE", "%F0%9F%98%80", "%FF", "%C0%AF",
		"a%20b", "%20s", "s%20", "a%0Ab", "a%09b", "a*b", "a;b", "a%3Fb", "a%23b", "%25", "%2525",
		// Decoded twice, these would name session s, or a/b: the API decodes once.
		"%2573", "a%252Fb", "%252E%252E",
	}
	var out []hostileCase
	for _, id := range ids {
		good := map[string]any{"messages": []any{msg("user", "a")}}
		for _, r := range []struct {
			method, path string
			body         any
		}{
			{"PUT", "/v1/sessions/" + id, map[string]any{"context_window": 4096}},
			{"GET", "/v1/sessions/" + id, nil},
			{"DELETE", "/v1/sessions/" + id, nil},
			{"POST", "/v1/sessions/" + id + "/messages", good},
			{"GET", "/v1/sessions/" + id + "/messages", nil},
			{"POST", "/v1/sessions/" + id + "/compact", map[string]any{}},
			{"POST", "/v1/sessions/" + id + "/context", map[string]any{"prompt": "train"}},
			{"GET", "/v1/sessions/" + id + "/cold", nil},
			{"POST", "/v1/sessions/" + id + "/messages/" + seed.coldID + "/recover", nil},
		} {
			out = append(out, hostileCase{fmt.Sprintf("id %.40s %s %s", id, r.method, strings.TrimPrefix(r.path, "/v1/sessions/"+id)), r.method, r.path, r.body, 400, "invalid_request", "session id"})
		}
		for _, field := range []string{"session_id", "sessions"} {
			raw := unescapeID(id)
			body := map[string]any{"query": "train", field: raw}
			if field == "sessions" {
				body[field] = []any{"s", raw}
			}
			out = append(out, hostileCase{fmt.Sprintf("id %.40s in search %s", id, field), "POST", "/v1/search", body, 400, "invalid_request", "session id"})
		}
	}
	return out
}

// unescapeID is the id a client meant by the URL segment, for the search
// body (which carries ids unescaped).
func unescapeID(seg string) string {
	if id, err := url.PathUnescape(seg); err == nil {
		return id
	}
	return seg
}

// messageIDCases: hostile message ids in the recover route of session s, and
// real ids through the wrong session.
func messageIDCases(seed hostileSeed) []hostileCase {
	cold := seed.coldID
	ids := []string{
		"..", ".", "%2E%2E", "%2F", "..%2F" + cold, "%00", cold + "%00", "%00" + cold, strings.ToLower(cold),
		cold + "%20", "%20" + cold, cold[:len(cold)-1], cold + "0", strings.Repeat("A", 8000), "%FF", "%C3%A9",
		"*", "%25", "'%20OR%201=1", cold + "%2F..",
		// Decoded twice, this one would be the cold id itself.
		fmt.Sprintf("%%25%X", cold[0]) + cold[1:],
	}
	var out []hostileCase
	for _, id := range ids {
		out = append(out, hostileCase{fmt.Sprintf("recover message %.40s", id), "POST", "/v1/sessions/s/messages/" + id + "/recover", nil, 404, "not_found", ""})
	}
	out = append(out,
		hostileCase{"recover a cold id through another session", "POST", "/v1/sessions/t/messages/" + cold + "/recover", nil, 404, "not_found", ""},
		hostileCase{"recover a cold id through a new session", "POST", "/v1/sessions/h1/messages/" + cold + "/recover", nil, 404, "not_found", ""},
		hostileCase{"recover another session's id", "POST", "/v1/sessions/s/messages/" + seed.otherID + "/recover", nil, 404, "not_found", ""},
		hostileCase{"recover an empty id", "POST", "/v1/sessions/s/messages//recover", nil, 404, "not_found", ""},
	)
	return out
}

// queryCases: bad query parameters on the list routes and context.
func queryCases() []hostileCase {
	var out []hostileCase
	// %zz, % and ; do not parse as a query at all: echo used to drop the
	// pair silently and answer with the default limit.
	limits := []string{"-1", "abc", "1.5", "0x10", "1e3", "99999999999999999999", "1001", "%00", "%20", "1%00", "%zz", "%", "1%2", "1;cursor=x"}
	for _, route := range []string{"/v1/sessions", "/v1/sessions/s/messages", "/v1/sessions/s/cold"} {
		for _, l := range limits {
			out = append(out, hostileCase{"limit=" + l + " " + route, "GET", route + "?limit=" + l, nil, 400, "invalid_request", "limit"})
		}
		for _, c := range []string{"..", "!!", "%00", "%FF", "a%2Fb", strings.Repeat("x", 129)} {
			out = append(out, hostileCase{"cursor=" + c + " " + route, "GET", route + "?cursor=" + c, nil, 400, "invalid_request", "cursor"})
		}
	}
	for _, route := range []string{"/v1/sessions/s/messages", "/v1/sessions/s/cold"} {
		for _, c := range []string{"garbage", "-1", "1e3", "18446744073709551616", "0x10", "%20"} {
			out = append(out, hostileCase{"cursor=" + c + " " + route, "GET", route + "?cursor=" + c, nil, 400, "invalid_request", "cursor"})
		}
	}
	for _, st := range []string{"bogus", "ACTIVE", "active,bogus", "%00", "active%00", "all,x"} {
		out = append(out, hostileCase{"state=" + st, "GET", "/v1/sessions/s/messages?state=" + st, nil, 400, "invalid_request", "state"})
	}
	for _, e := range []string{"maybe", "2", "%00"} {
		out = append(out, hostileCase{"context explain=" + e, "POST", "/v1/sessions/s/context?explain=" + e, map[string]any{"prompt": "train"}, 400, "invalid_request", "explain"})
	}
	return out
}

// structureCases: size and shape attacks, and values at the edge of valid.
func structureCases() []hostileCase {
	nest := func(n int) string { return strings.Repeat(`{"a":`, n) + `1` + strings.Repeat(`}`, n) }
	arrNest := func(n int) string { return strings.Repeat(`[`, n) + strings.Repeat(`]`, n) }
	manyKeys := func(n, valueLen int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"k%d":%q`, i, strings.Repeat("v", valueLen))
		}
		b.WriteString("}")
		return b.String()
	}
	msgs := func(n int) string {
		return `{"messages":[` + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"x"},`, n), ",") + `]}`
	}
	md := func(raw string) string { return spliceJSON(userBody, "messages.0.metadata", raw) }
	smd := func(raw string) string { return `{"metadata":` + raw + `}` }
	mdValue := func(raw string) string { return spliceJSON(userBody, "messages.0.metadata.k", raw) }
	return []hostileCase{
		{"10000 messages in one call", "POST", "/v1/sessions/s/messages", msgs(10000), 413, "too_large", "1000"},
		{"1001 messages in one call", "POST", "/v1/sessions/s/messages", msgs(1001), 413, "too_large", "1000"},
		{"10000 messages to a new session", "POST", "/v1/sessions/h1/messages", msgs(10000), 413, "too_large", "1000"},
		{"content over 1 MiB", "POST", "/v1/sessions/s/messages", map[string]any{"messages": []any{msg("user", strings.Repeat("a", 1<<20+1))}}, 413, "too_large", "content"},
		{"second message over 1 MiB", "POST", "/v1/sessions/s/messages", map[string]any{"messages": []any{msg("user", "ok"), msg("user", strings.Repeat("é", 1<<19+1))}}, 413, "too_large", "content"},
		{"message metadata 65 keys", "POST", "/v1/sessions/s/messages", md(manyKeys(65, 1)), 400, "invalid_request", "keys"},
		{"message metadata 100000 keys", "POST", "/v1/sessions/s/messages", md(manyKeys(100000, 1)), 400, "invalid_request", "keys"},
		{"message metadata 20 KiB value", "POST", "/v1/sessions/s/messages", md(manyKeys(1, 20<<10)), 413, "too_large", "metadata"},
		{"message metadata 64 long values", "POST", "/v1/sessions/s/messages", md(manyKeys(64, 1<<10)), 413, "too_large", "metadata"},
		{"message metadata 20 KiB key", "POST", "/v1/sessions/s/messages", md(`{"` + strings.Repeat("k", 20<<10) + `":1}`), 413, "too_large", "metadata"},
		{"message metadata empty key", "POST", "/v1/sessions/s/messages", md(`{"":1}`), 400, "invalid_request", "key"},
		{"message metadata NUL key", "POST", "/v1/sessions/s/messages", md(`{"a\u0000":1}`), 400, "invalid_request", "key"},
		{"message metadata invalid utf-8 key", "POST", "/v1/sessions/s/messages", []byte(md("{\"\xff\":1}")), 400, "invalid_request", "UTF-8"},
		{"message metadata surrogate key", "POST", "/v1/sessions/s/messages", md(`{"\ud800":1}`), 400, "invalid_request", "surrogate"},
		{"message metadata nested 1000", "POST", "/v1/sessions/s/messages", md(nest(1000)), 400, "invalid_request", "metadata"},
		{"message metadata nested arrays 1000", "POST", "/v1/sessions/s/messages", mdValue(arrNest(1000)), 400, "invalid_request", "metadata"},
		{"message metadata nested 20000", "POST", "/v1/sessions/s/messages", md(nest(20000)), 400, "invalid_request", ""},
		{"message metadata object value", "POST", "/v1/sessions/s/messages", mdValue(`{}`), 400, "invalid_request", "metadata"},
		{"message metadata array value", "POST", "/v1/sessions/s/messages", mdValue(`[]`), 400, "invalid_request", "metadata"},
		{"message metadata number 1e400", "POST", "/v1/sessions/s/messages", mdValue(`1e400`), 400, "invalid_request", "metadata"},
		{"message metadata number -1e400", "POST", "/v1/sessions/s/messages", mdValue(`-1e400`), 400, "invalid_request", "metadata"},
		{"unknown field nested 20000", "POST", "/v1/sessions/s/messages", `{"x":` + arrNest(20000) + `,"messages":[{"role":"user","content":"a","important":"no"}]}`, 400, "invalid_request", ""},
		{"session metadata 65 keys", "PUT", "/v1/sessions/h1", smd(manyKeys(65, 1)), 400, "invalid_request", "keys"},
		{"session metadata 100000 keys", "PUT", "/v1/sessions/h1", smd(manyKeys(100000, 1)), 400, "invalid_request", "keys"},
		{"session metadata 1 MiB value", "PUT", "/v1/sessions/h1", smd(manyKeys(1, 1<<20)), 413, "too_large", "metadata"},
		{"session metadata nested 1000", "PUT", "/v1/sessions/h1", smd(nest(1000)), 400, "invalid_request", "metadata"},
		{"session metadata nested 20000", "PUT", "/v1/sessions/h1", smd(nest(20000)), 400, "invalid_request", ""},
		{"session metadata number 1e400", "PUT", "/v1/sessions/h1", smd(`{"n":1e400}`), 400, "invalid_request", "metadata"},
		{"session metadata on s 100000 keys", "PUT", "/v1/sessions/s", smd(manyKeys(100000, 1)), 400, "invalid_request", "keys"},
		{"tool_calls on user", "POST", "/v1/sessions/s/messages", spliceJSON(callBody, "messages.0.role", `"user"`), 400, "invalid_request", "tool_calls"},
		{"tool_call without function name", "POST", "/v1/sessions/s/messages", spliceJSON(callBody, "messages.0.tool_calls.0.function.name", `""`), 400, "invalid_request", "name"},
		{"name over 256 bytes", "POST", "/v1/sessions/s/messages", spliceJSON(userBody, "messages.0.name", fmt.Sprintf("%q", strings.Repeat("n", 257))), 400, "invalid_request", "name"},
		{"created_at year 10000 after UTC", "POST", "/v1/sessions/s/messages", spliceJSON(userBody, "messages.0.created_at", `"9999-12-31T23:59:59-23:59"`), 400, "invalid_request", "created_at"},
		{"created_at year -1 after UTC", "POST", "/v1/sessions/s/messages", spliceJSON(userBody, "messages.0.created_at", `"0000-01-01T00:00:00+23:59"`), 400, "invalid_request", "created_at"},
		{"created_at month 13", "POST", "/v1/sessions/s/messages", spliceJSON(userBody, "messages.0.created_at", `"2026-13-01T00:00:00Z"`), 400, "invalid_request", "created_at"},
		{"created_at offset 24h", "POST", "/v1/sessions/s/messages", spliceJSON(userBody, "messages.0.created_at", `"2026-01-01T00:00:00+24:00"`), 400, "invalid_request", "created_at"},
		{"created_at unix seconds", "POST", "/v1/sessions/s/messages", spliceJSON(userBody, "messages.0.created_at", `"1700000000"`), 400, "invalid_request", "created_at"},
		{"search query over 16 KiB", "POST", "/v1/search", map[string]any{"query": strings.Repeat("q ", 9<<10)}, 400, "invalid_request", "query"},
		{"search 1001 sessions", "POST", "/v1/search", map[string]any{"query": "a", "sessions": make1001()}, 400, "invalid_request", "sessions"},
		{"search k 101", "POST", "/v1/search", map[string]any{"query": "a", "k": 101}, 400, "invalid_request", "k"},
		{"search neighbors -1", "POST", "/v1/search", map[string]any{"query": "a", "neighbors": -1}, 400, "invalid_request", "neighbors"},
		{"search neighbors 11", "POST", "/v1/search", map[string]any{"query": "a", "neighbors": 11}, 400, "invalid_request", "neighbors"},
		{"search until before since", "POST", "/v1/search", map[string]any{"query": "a", "since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, 400, "invalid_request", "until"},
		{"search state bogus", "POST", "/v1/search", map[string]any{"query": "a", "states": []any{"bogus"}}, 400, "invalid_request", "state"},
		{"search whitespace query", "POST", "/v1/search", map[string]any{"query": " \t\n "}, 400, "invalid_request", "query"},
		{"context prompt over a message's size", "POST", "/v1/sessions/s/context", map[string]any{"prompt": strings.Repeat("p", 1<<20+1)}, 413, "too_large", "prompt"},
		{"context max_tokens 0", "POST", "/v1/sessions/s/context", map[string]any{"prompt": "a", "max_tokens": 0}, 400, "invalid_request", "max_tokens"},
		{"context max_tokens -1", "POST", "/v1/sessions/s/context", map[string]any{"prompt": "a", "max_tokens": -1}, 400, "invalid_request", "max_tokens"},
		{"context max_tokens 2^31", "POST", "/v1/sessions/s/context", map[string]any{"prompt": "a", "max_tokens": 1 << 31}, 400, "invalid_request", "max_tokens"},
		{"context max_tokens 2^63", "POST", "/v1/sessions/s/context", `{"prompt":"a","max_tokens":9223372036854775808}`, 400, "invalid_request", "max_tokens"},
		{"context of an unknown session", "POST", "/v1/sessions/h1/context", map[string]any{"prompt": "a"}, 404, "not_found", ""},
		{"compact an unknown session", "POST", "/v1/sessions/h1/compact", map[string]any{}, 404, "not_found", ""},
		{"delete an unknown session", "DELETE", "/v1/sessions/h1", nil, 404, "not_found", ""},
		{"context_window 255", "PUT", "/v1/sessions/h1", map[string]any{"context_window": 255}, 400, "invalid_request", "context_window"},
		{"context_window -1", "PUT", "/v1/sessions/h1", map[string]any{"context_window": -1}, 400, "invalid_request", "context_window"},
		{"context_window 2^40", "PUT", "/v1/sessions/h1", map[string]any{"context_window": 1 << 40}, 400, "invalid_request", "context_window"},
		{"encoding change on s", "PUT", "/v1/sessions/s", map[string]any{"encoding": "cl100k_base"}, 409, "conflict", "encoding"},
		{"encoding empty", "PUT", "/v1/sessions/h1", map[string]any{"encoding": ""}, 400, "invalid_request", "encoding"},
		{"policy trigger 1", "PUT", "/v1/sessions/s", map[string]any{"compaction_trigger_pct": 1}, 400, "invalid_request", "compaction_trigger_pct"},
		{"policy target above trigger", "PUT", "/v1/sessions/s", map[string]any{"target_pct": 0.9}, 400, "invalid_request", "target_pct"},
		{"policy negative weight", "PUT", "/v1/sessions/s", map[string]any{"weight_recency": -1}, 400, "invalid_request", "weight"},
		{"policy half life 0", "PUT", "/v1/sessions/h1", map[string]any{"recency_half_life_turns": 0}, 400, "invalid_request", "recency_half_life_turns"},
		{"policy recoverable_for_days 3e6", "PUT", "/v1/sessions/s", map[string]any{"recoverable_for_days": 3_000_000}, 400, "invalid_request", "recoverable_for_days"},
		{"policy recoverable_for_days 2^62", "PUT", "/v1/sessions/h1", map[string]any{"recoverable_for_days": 1 << 62}, 400, "invalid_request", "recoverable_for_days"},
		{"wrong method on messages", "DELETE", "/v1/sessions/s/messages", nil, 405, "method_not_allowed", ""},
		{"wrong method on search", "GET", "/v1/search", nil, 405, "method_not_allowed", ""},
		{"unknown route under session", "POST", "/v1/sessions/s/purge", nil, 404, "not_found", ""},
		{"raw slash in id", "GET", "/v1/sessions/a/b", nil, 404, "not_found", ""},
		// At the edge of valid, read-only: must answer, and change nothing.
		{"search since year 1", "POST", "/v1/search", map[string]any{"query": "train", "since": "0001-01-02T00:00:00Z"}, 200, "", ""},
		{"search until year 9999", "POST", "/v1/search", map[string]any{"query": "train", "until": "9999-12-31T23:59:59Z"}, 200, "", ""},
		{"search since year 9999", "POST", "/v1/search", map[string]any{"query": "train", "since": "9999-01-01T00:00:00Z"}, 200, "", ""},
		{"search since and until far apart", "POST", "/v1/search", map[string]any{"query": "train", "since": "0001-01-02T00:00:00+23:59", "until": "9999-12-31T23:59:59-23:59", "mode": "text"}, 200, "", ""},
		{"search vector mode far dates", "POST", "/v1/search", map[string]any{"query": "train", "since": "0001-01-02T00:00:00Z", "until": "9999-12-31T23:59:59Z", "mode": "vector"}, 200, "", ""},
		{"search only punctuation", "POST", "/v1/search", map[string]any{"query": "?!*:~^()[]{}\"\\/+-&&||"}, 200, "", ""},
		{"search bleve syntax", "POST", "/v1/search", map[string]any{"query": `+content:/.*/ -state:active "unterminated`, "mode": "text"}, 200, "", ""},
		{"search only stop words", "POST", "/v1/search", map[string]any{"query": "the of and to a in", "mode": "text"}, 200, "", ""},
		{"search special tokens", "POST", "/v1/search", map[string]any{"query": "<|endoftext|><|im_start|>"}, 200, "", ""},
		{"search 16 KiB one word", "POST", "/v1/search", map[string]any{"query": strings.Repeat("z", 16<<10)}, 200, "", ""},
		{"search all 1000 sessions", "POST", "/v1/search", map[string]any{"query": "train", "sessions": make1000()}, 200, "", ""},
		{"search k 100 neighbors 10", "POST", "/v1/search", map[string]any{"query": "train", "k": 100, "neighbors": 10}, 200, "", ""},
		{"compact dry run with odd prompt", "POST", "/v1/sessions/s/compact", map[string]any{"dry_run": true, "prompt": "<|endoftext|> \u202e\U0001F600"}, 200, "", ""},
		{"list sessions limit 1000", "GET", "/v1/sessions?limit=1000&cursor=", nil, 200, "", ""},
		{"list messages state all twice", "GET", "/v1/sessions/s/messages?state=all&state=all", nil, 200, "", ""},
		{"list messages of unknown session", "GET", "/v1/sessions/h1/messages", nil, 404, "not_found", ""},
	}
}

func make1001() []any {
	out := make([]any, 1001)
	for i := range out {
		out[i] = fmt.Sprintf("x%d", i)
	}
	return out
}

func make1000() []any { return make1001()[:1000] }
