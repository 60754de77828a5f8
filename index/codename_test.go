package index

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// Code names match whole and by their parts, in documents and queries: a
// search for a file, an identifier or an error code finds the tool output
// that has it first, not the short messages that share one of its words
// ("go vet" for reconcile_worker_v2.go), and a part ("reconcile_worker",
// "parseConfig"'s "config") finds the name.
func TestCodeNamesWholeAndParts(t *testing.T) {
	x := openTest(t, Options{})
	filler := strings.Repeat("ok   \tpkg/other/module_x\t0.01s\nchecked the build output of the worker pool and the api server\n", 40)
	var msgs []*memory.Message
	add := func(id, content string, topic int) {
		msgs = append(msgs, msg("t", "s", id, content, topic))
	}
	add("file", "$ git status\nmodified:   internal/jobs/reconcile_worker_v2.go\nmodified:   README.md\n"+filler, 1)
	add("conf", "panic: parseConfig failed at cmd/serve/main.go:42:7 with ERR_CONN_RESET (v1.12.3)\n"+filler, 2)
	for i := range 20 {
		add(fmt.Sprintf("vet%d", i), []string{"go vet", "ran go vet again", "go vet ./... is clean", "go test passed"}[i%4], 3)
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})

	for _, tc := range []struct{ query, want string }{
		{"reconcile_worker_v2.go", "file"},
		{"where is reconcile_worker_v2.go", "file"},
		{"internal/jobs/reconcile_worker_v2.go", "file"},
		{"ERR_CONN_RESET", "conf"},
		{"conn_reset", "conf"},
		{"main.go:42", "conf"},
		{"parseConfig", "conf"},
		{"v1.12.3", "conf"},
	} {
		for _, mode := range []string{memory.ModeText, memory.ModeHybrid} {
			q := memory.SearchQuery{Tenant: "t", Text: tc.query, Mode: mode, K: 5}
			if mode == memory.ModeHybrid {
				q.Vector = topicVec(3) // a vector that favours the go vet messages
			}
			hits := mustSearch(t, x, q)
			if len(hits) == 0 || hits[0].ID != tc.want {
				t.Errorf("%s %q: %v, want %s first", mode, tc.query, ids(hits), tc.want)
			}
		}
	}
	// By their parts: a word of a name finds it.
	for _, tc := range []struct{ query, want string }{
		{"reconcile_worker", "file"},
		{"jobs", "file"},
		{"config", "conf"},
	} {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: tc.query, Mode: memory.ModeText, K: 10})
		found := false
		for _, h := range hits {
			found = found || h.ID == tc.want
		}
		if !found {
			t.Errorf("text %q: %v, want %s among them", tc.query, ids(hits), tc.want)
		}
	}
}

// The terms a code name adds are bounded to those people search for: a
// path gives its file's name whole (its directories are words), a path of
// ids and a timestamp give nothing whole, a directory stays whole. Each of
// the others was a term of its own at nearly every mention in tool output.
func TestCodeNameTerms(t *testing.T) {
	x := openTest(t, Options{})
	an := x.text.Mapping().AnalyzerNamed(analyzerName)
	for _, tc := range []struct {
		text      string
		want, not []string
	}{
		{"M internal/jobs/reconcile_worker_v2.go", []string{"reconcile_worker_v2.go", "reconcil", "worker"}, []string{"internal/jobs/reconcile_worker_v2.go"}},
		{"at cmd/serve/main.go:42:7", []string{"main.go", "serv"}, []string{"cmd/serve/main.go", "main.go:42"}},
		{"GET /api/v2/orders/8812 -> 200", []string{"8812", "order"}, []string{"/api/v2/orders/8812", "/api/v2/orders"}},
		{"ls internal/jobs", []string{"internal/job"}, nil},
		{"ticket ABC-1234 and ERR_CONN_RESET", []string{"abc-1234", "err_conn_reset", "conn"}, nil},
		{"2026-01-02T15:04:05.000Z started", []string{"2026"}, []string{"2026-01-02t15:04:05.000z"}},
	} {
		terms := map[string]bool{}
		for _, tok := range an.Analyze([]byte(tc.text)) {
			terms[string(tok.Term)] = true
		}
		for _, w := range tc.want {
			if !terms[w] {
				t.Errorf("%q: no term %q in %v", tc.text, w, terms)
			}
		}
		for _, n := range tc.not {
			if terms[n] {
				t.Errorf("%q: term %q, want none", tc.text, n)
			}
		}
	}
}
