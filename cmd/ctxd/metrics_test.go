package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeMetrics fetches /metrics over HTTP, as Prometheus does, and parses it.
func scrapeMetrics(t *testing.T, ts *testServer) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d", res.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// metricValue sums the series of a family whose labels include want: the
// counter or gauge value, or the sample count of a histogram.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func TestMetricsEndToEnd(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	const session = "sess-metrics-7f3a9c"
	ts.mustDo(200, "PUT", "/v1/sessions/"+session, map[string]any{"context_window": 2000, "relevance_cutoff": 0.06})
	ts.store(session, map[string]any{"role": "system", "content": "You are a helpful assistant.", "pinned": true})
	writes, stored := 1, 1
	summarized := false
	for i := 0; i < 120 && !summarized; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		body := ts.mustDo(201, "POST", "/v1/sessions/"+session+"/messages", map[string]any{"messages": []any{msg(role, chatter(i))}})
		writes++
		stored++
		if c, ok := body["compaction"].(map[string]any); ok && len(c["summaries"].([]any)) > 0 {
			summarized = true
		}
	}
	if !summarized {
		t.Fatal("no compaction wrote a summary in 120 writes")
	}
	cold := ts.mustDo(200, "GET", "/v1/sessions/"+session+"/cold?limit=1", nil)["chunks"].([]any)
	ts.mustDo(200, "POST", "/v1/sessions/"+session+"/messages/"+cold[0].(map[string]any)["id"].(string)+"/recover", nil)
	ts.mustDo(200, "POST", "/v1/sessions/"+session+"/context", map[string]any{"prompt": "what did we say about the river?", "max_tokens": 1500})
	ts.search(map[string]any{"query": "river walk", "session_id": session})
	ts.mustDo(404, "GET", "/v1/sessions/"+session+"/no-such-thing", nil)

	// A background compaction the context call started may still log:
	// scrape once the service's background work is done.
	if err := ts.Main.Service.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	fams := scrapeMetrics(t, ts)
	requests := func(route, method, code string) float64 {
		return metricValue(fams, "ctxd_http_requests_total", map[string]string{"route": route, "method": method, "code": code})
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
	if got := metricValue(fams, "ctxd_http_request_duration_seconds", map[string]string{"route": "/v1/sessions/:id/context"}); got != 1 {
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
		if got := metricValue(fams, name, nil); got != want || want == 0 {
			t.Errorf("%s = %v, want %v (from the event log), not 0", name, got, want)
		}
	}
	if got := metricValue(fams, "ctxd_compactions_total", map[string]string{"trigger": "auto"}); got != float64(compactions) {
		t.Errorf("auto compactions = %v, want all %d", got, compactions)
	}
	summaries := metricValue(fams, "ctxd_compaction_summaries_total", nil)
	if summaries < 1 {
		t.Errorf("summaries = %v", summaries)
	}
	if got := metricValue(fams, "ctxd_summarizer_duration_seconds", map[string]string{"method": "extractive"}); got < summaries {
		t.Errorf("summarizer timed %v times, fewer than the %v summaries written", got, summaries)
	}
	if got := metricValue(fams, "ctxd_embedder_duration_seconds", nil); got < float64(writes) {
		t.Errorf("embedder timed %v times, fewer than the %d writes", got, writes)
	}
	if got := metricValue(fams, "ctxd_embedder_texts_total", nil); got < float64(stored) {
		t.Errorf("embedded %v texts, fewer than the %d messages stored", got, stored)
	}

	// Sizes are read at the scrape.
	for _, name := range []string{"ctxd_store_size_bytes", "ctxd_index_size_bytes", "ctxd_index_documents",
		"ctxd_index_vectors", "ctxd_cold_storage_size_bytes", "ctxd_event_log_size_bytes"} {
		if metricValue(fams, name, nil) <= 0 {
			t.Errorf("%s = %v, want > 0", name, metricValue(fams, name, nil))
		}
	}
	if docs := metricValue(fams, "ctxd_index_documents", nil); docs < float64(stored) {
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
	ts := startServer(t, t.TempDir(), func(c *Config) { c.Metrics = false })
	if ts.Main.Metrics != nil {
		t.Fatal("--metrics=false still set up metrics")
	}
	ts.mustDo(404, "GET", "/metrics", nil)
	ts.store("s", msg("user", "hello"))
}
