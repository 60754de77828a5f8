package server_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/internal/server/servertest"
)

func TestMetricsEndToEnd(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	const session = "sess-metrics-7f3a9c"
	ts.putSession(session, map[string]any{"context_window": 2000, "relevance_cutoff": 0.06})
	ts.store(session, api.MessageIn{Role: "system", Content: "You are a helpful assistant.", Pinned: true})
	writes, stored := 1, 1
	summarized := false
	for i := 0; i < 120 && !summarized; i++ {
		out := ts.append(session, turn(i))
		writes++
		stored++
		if c := out.Compaction; c != nil && len(c.Summaries) > 0 {
			summarized = true
		}
	}
	if !summarized {
		t.Fatal("no compaction wrote a summary in 120 writes")
	}
	cold := ts.cold(session, "?limit=1")
	ts.call(200, "POST", "/v1/sessions/"+session+"/messages/"+cold[0].ID+"/recover", nil, nil)
	ts.context(session, "", api.ContextIn{Prompt: "what did we say about the river?", MaxTokens: maxTokens(1500)})
	ts.search(api.SearchIn{Query: "river walk", SessionID: session})
	ts.call(404, "GET", "/v1/sessions/"+session+"/no-such-thing", nil, nil)

	// A background compaction the context call started may still log:
	// scrape once the service's background work is done.
	if err := ts.Main.Service.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	fams := servertest.Scrape(t, ts.URL)
	requests := func(route, method, code string) float64 {
		return servertest.MetricValue(fams, "ctxd_http_requests_total", map[string]string{"route": route, "method": method, "code": code})
	}
	for _, c := range []struct {
		route, method, code string
		want                float64
	}{
		{"/v1/sessions/:id", "PUT", "200", 1},
		{"/v1/sessions/:id/messages", "POST", "201", float64(writes)},
		{"/v1/sessions/:id/context", "POST", "200", 1},
		{"/v1/search", "POST", "200", 1},
		{"/v1/sessions/:id/cold", "GET", "200", 1},
		{"/v1/sessions/:id/messages/:message_id/recover", "POST", "200", 1},
		{"unmatched", "GET", "404", 1},
	} {
		if got := requests(c.route, c.method, c.code); got != c.want {
			t.Errorf("requests{route=%q,method=%s,code=%s} = %v, want %v", c.route, c.method, c.code, got, c.want)
		}
	}
	if got := servertest.MetricValue(fams, "ctxd_http_request_duration_seconds", map[string]string{"route": "/v1/sessions/:id/context"}); got != 1 {
		t.Errorf("context latency samples = %v, want 1", got)
	}

	// The counters agree with the event logs they are read off.
	compactions := len(readEvents(t, filepath.Join(ts.Dir, "logs", "compaction.jsonl")))
	drops := readEvents(t, filepath.Join(ts.Dir, "logs", "drops.jsonl"))
	var dropped, summarizedMsgs float64
	for _, d := range drops {
		if d["reason"] == "summarized" {
			summarizedMsgs++
		} else {
			dropped++
		}
	}
	var moved float64
	for _, r := range readEvents(t, filepath.Join(ts.Dir, "logs", "recoveries.jsonl")) {
		if r["answer_only"] != true {
			moved++
		}
	}
	for name, want := range map[string]float64{
		"ctxd_compactions_total":                    float64(compactions),
		"ctxd_compaction_dropped_messages_total":    dropped,
		"ctxd_compaction_summarized_messages_total": summarizedMsgs,
		"ctxd_recovered_messages_total":             float64(moved),
		"ctxd_context_window_usage_ratio":           float64(writes), // one context-health event per write
	} {
		if got := servertest.MetricValue(fams, name, nil); got != want || want == 0 {
			t.Errorf("%s = %v, want %v (from the event log), not 0", name, got, want)
		}
	}
	if got := servertest.MetricValue(fams, "ctxd_compactions_total", map[string]string{"trigger": "auto"}); got != float64(compactions) {
		t.Errorf("auto compactions = %v, want all %d", got, compactions)
	}
	summaries := servertest.MetricValue(fams, "ctxd_compaction_summaries_total", nil)
	if summaries < 1 {
		t.Errorf("summaries = %v", summaries)
	}
	if got := servertest.MetricValue(fams, "ctxd_summarizer_duration_seconds", map[string]string{"method": "extractive"}); got < summaries {
		t.Errorf("summarizer timed %v times, fewer than the %v summaries written", got, summaries)
	}
	if got := servertest.MetricValue(fams, "ctxd_embedder_duration_seconds", nil); got < float64(writes) {
		t.Errorf("embedder timed %v times, fewer than the %d writes", got, writes)
	}
	if got := servertest.MetricValue(fams, "ctxd_embedder_texts_total", nil); got < float64(stored) {
		t.Errorf("embedded %v texts, fewer than the %d messages stored", got, stored)
	}

	// Sizes are read at the scrape.
	for _, name := range []string{"ctxd_store_size_bytes", "ctxd_index_size_bytes", "ctxd_index_documents",
		"ctxd_index_vectors", "ctxd_cold_storage_size_bytes", "ctxd_event_log_size_bytes"} {
		if servertest.MetricValue(fams, name, nil) <= 0 {
			t.Errorf("%s = %v, want > 0", name, servertest.MetricValue(fams, name, nil))
		}
	}
	if docs := servertest.MetricValue(fams, "ctxd_index_documents", nil); docs < float64(stored) {
		t.Errorf("index holds %v documents, fewer than the %d stored", docs, stored)
	}

	// No label value names a session or a message.
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if strings.Contains(l.GetValue(), session) || strings.Contains(l.GetValue(), "sess-") {
					t.Errorf("%s has label %s=%q", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	if fams["go_goroutines"] == nil || fams["process_open_fds"] == nil {
		t.Error("Go and process metrics are missing")
	}
}

func TestMetricsOff(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.Metrics = false })
	if ts.Main.Metrics != nil {
		t.Fatal("--metrics=false still set up metrics")
	}
	ts.call(404, "GET", "/metrics", nil, nil)
	ts.store("s", msg("user", "hello"))
}
