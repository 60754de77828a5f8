package httpapi

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// The fuzz targets drive every handler's decoding through the real router
// and service (helpers_test.go). Whatever the input, the answer is below 500
// and, when it is an error, in API.md's shape with the code of its status.
// Their seeds run as plain tests in `make test`; `make fuzz` explores.

// Seeds shared by every body: the empty and malformed, the wrong shapes,
// and encodings a JSON decoder may take differently from the client.
var commonSeeds = []string{
	``, ` `, `{}`, `null`, `[]`, `"x"`, `1`, `true`, `{`, `{}{}`, `{"a":1}x`, "\xef\xbb\xbf{}", "{\"a\":\"\xff\"}",
	`{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\u0000"}`, "{\"a\":\"\x00\"}", `{"a":1e400}`,
	strings.Repeat(`{"a":`, 1000) + `1` + strings.Repeat(`}`, 1000), strings.Repeat(`[`, 20000),
}

func addSeeds(f *testing.F, bodies ...string) {
	for _, b := range append(append([]string{}, commonSeeds...), bodies...) {
		f.Add([]byte(b))
	}
}

// fuzzBody sends body to method target and checks the answer.
func fuzzBody(t *testing.T, method, target string, body []byte) answer {
	s := testServer(t)
	a := serve(t, s, method, target, body)
	checkAnswer(t, a)
	return a
}

func FuzzPutSession(f *testing.F) {
	addSeeds(f,
		`{"context_window":4096,"encoding":"o200k_base","metadata":{"owner":"me","n":1,"ok":true}}`,
		`{"context_window":"big"}`, `{"context_window":1e400}`, `{"context_window":255}`, `{"encoding":"p50k_base"}`,
		`{"metadata":{"a":{"b":1}}}`, `{"metadata":{"":1}}`, `{"metadata":[]}`, `{"compaction_trigger_pct":0.6,"target_pct":0.3}`,
		`{"compaction_trigger_pct":1}`, `{"recoverable_for_days":3000000}`, `{"weight_similarity":1e308,"weight_recency":1e308}`,
		`{"tool_keep_head_chars":4611686018427387904,"tool_keep_tail_chars":4611686018427387904}`, `{"reserve_tokens":-1}`,
	)
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzBody(t, "PUT", "/v1/sessions/fz-put", body)
	})
}

func FuzzAppendMessages(f *testing.F) {
	addSeeds(f,
		`{"messages":[{"role":"user","content":"hello there"}]}`,
		`{"messages":[{"role":"system","content":"rules","pinned":true,"important":true,"name":"ops","metadata":{"k":"v","n":2.5}}]}`,
		`{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"a b"}]}`,
		`{"messages":[{"role":"user","content":"x","created_at":"2026-01-02T15:04:05Z"}]}`,
		`{"messages":[{"role":"user","content":"x","created_at":"9999-12-31T23:59:59-23:59"}]}`,
		`{"messages":[{"role":"robot","content":"x"}]}`, `{"messages":[{"role":"user","content":""}]}`,
		`{"messages":[{"role":"user","content":42}]}`, `{"messages":"hi"}`, `{"messages":[]}`, `{"messages":[null]}`,
		`{"messages":[{"role":"user","content":"<|endoftext|> \u202e"}]}`,
		`{"messages":[{"role":"user","content":"a","tool_calls":[{"function":{"name":"f"}}]}]}`,
		`{"messages":[{"role":"tool","content":"a","tool_call_id":"\u0000"}]}`,
		`{"messages":[{"role":"tool","content":"","tool_call_id":"c1"}]}`,
		`{"messages":[{"role":"user","content":"x","message_id":"m-1"},{"role":"user","content":"y","message_id":"m-1"}]}`,
		`{"messages":[{"role":"user","content":"x","message_id":7}]}`,
	)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := fuzzBody(t, "POST", "/v1/sessions/fz-append/messages", body)
		if a.status == 201 {
			ids, _ := a.body["ids"].([]any)
			toks, _ := a.body["tokens"].([]any)
			if len(ids) == 0 || len(ids) != len(toks) {
				t.Fatalf("201 with ids %v and tokens %v", ids, toks)
			}
		}
	})
}

func FuzzSearch(f *testing.F) {
	addSeeds(f,
		`{"query":"train river"}`, `{"query":"train","session_id":"s","k":5,"mode":"text"}`,
		`{"query":"train","sessions":["s","t"],"states":["active","dropped"],"since":"2020-01-01T00:00:00Z","until":"2030-01-01T00:00:00Z"}`,
		`{"query":"train","since":"0001-01-02T00:00:00Z","until":"9999-12-31T23:59:59Z"}`,
		`{"query":"x","mode":"vector","neighbors":3}`, `{"query":""}`, `{"query":"a","k":-1}`, `{"query":"a","mode":"fuzzy"}`,
		`{"query":"a","session_id":"../x"}`, `{"query":"+content:/.*/ -state:active \"unterminated"}`,
		`{"query":"a","states":["bogus"]}`, `{"query":"a","since":"yesterday"}`, `{"query":["a"]}`,
	)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := fuzzBody(t, "POST", "/v1/search", body)
		if a.status == 200 {
			if _, ok := a.body["results"].([]any); !ok {
				t.Fatalf("200 without results: %.300s", a.raw)
			}
		}
	})
}

func FuzzCompact(f *testing.F) {
	addSeeds(f, `{"dry_run":true}`, `{"prompt":"the river","dry_run":true}`, `{"prompt":"the train"}`, `{"dry_run":"yes"}`,
		`{"prompt":42}`, `{"prompt":"\u0000"}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzBody(t, "POST", "/v1/sessions/s/compact", body)
	})
}

func FuzzContext(f *testing.F) {
	addSeeds(f, `{"prompt":"what about the river"}`, `{"prompt":"train","max_tokens":300}`, `{"prompt":"x","max_tokens":1}`,
		`{"prompt":"x","explain":true}`, `{"max_tokens":-1}`, `{"max_tokens":9223372036854775808}`, `{"prompt":null}`,
		`{"prompt":"<|endoftext|>"}`, `{"prompt":"x","format":"openai"}`, `{"prompt":"x","format":"xml"}`, `{"format":1}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzBody(t, "POST", "/v1/sessions/s/context", body)
	})
}

// FuzzRecover fuzzes both path segments of the recover route (and its
// ignored body); the cold message's id is a seed.
func FuzzRecover(f *testing.F) {
	testServer(f)
	for _, seg := range [][2]string{
		{"s", shared.cold}, {"s", "nope"}, {"%2573", shared.cold}, {"..", shared.cold}, {"s", ".."}, {"s", "%2F"},
		{"s", "%00"}, {"%00", "x"}, {"a%2Fb", shared.cold}, {strings.Repeat("x", 129), "x"}, {"s", strings.ToLower(shared.cold)},
		{"%C3%A9", "%FF"}, {"s", "%25" + shared.cold},
	} {
		f.Add(seg[0], seg[1], []byte(nil))
	}
	f.Fuzz(func(t *testing.T, session, message string, body []byte) {
		s := testServer(t)
		req, err := http.NewRequest("POST", "http://ctxd/v1/sessions/"+session+"/messages/"+message+"/recover", bytes.NewReader(body))
		if err != nil {
			t.Skip("not a URL a client can send")
		}
		a := serveRequest(t, s, req)
		checkAnswer(t, a)
	})
}

// FuzzListQuery fuzzes the query string of the list routes (and of context,
// whose only query parameter is explain).
func FuzzListQuery(f *testing.F) {
	for _, q := range []string{"", "limit=10", "limit=-1", "limit=abc", "limit=1001", "limit=99999999999999999999",
		"cursor=garbage", "cursor=..", "cursor=%00", "cursor=18446744073709551616", "state=bogus", "state=all",
		"state=active,dropped", "state=active&state=all", "limit=%zz", "a=%", ";;;&&&==", "explain=maybe", "explain=true",
		"format=openai", "format=ctxd", "format=", "format=openai&format=xml"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		s := testServer(t)
		for _, target := range []string{"/v1/sessions", "/v1/sessions/s/messages", "/v1/sessions/s/cold"} {
			req, _ := http.NewRequest("GET", "http://ctxd"+target, nil)
			req.URL.RawQuery = query
			checkAnswer(t, serveRequest(t, s, req))
		}
		req, _ := http.NewRequest("POST", "http://ctxd/v1/sessions/s/context", strings.NewReader(`{"prompt":"river","max_tokens":200}`))
		req.URL.RawQuery = query
		checkAnswer(t, serveRequest(t, s, req))
	})
}
