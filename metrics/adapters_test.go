package metrics_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxd/ctxd/index/openai"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/metrics"
	"github.com/ctxd/ctxd/summarize"
	"github.com/ctxd/ctxd/tokenizer"
)

// embeddingsServer speaks the OpenAI embeddings wire format; while failing
// is set it refuses with a 400, which the client does not retry.
func embeddingsServer(t *testing.T, failing *atomic.Bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if failing.Load() {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "refused", "type": "invalid_request_error"}})
			return
		}
		var req struct{ Input []string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decode embeddings request: %v", err)
		}
		var data []map[string]any
		for i := range req.Input {
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": []float32{0.6, 0.8, 0}})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": "fake-embed", "data": data})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newEmbedder(t *testing.T, srv *httptest.Server) memory.Embedder {
	t.Helper()
	e, err := openai.NewEmbedder(context.Background(), openai.Config{BaseURL: srv.URL + "/v1", Model: "fake-embed", Dim: 3,
		Timeout: 5 * time.Second, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEmbedderTimesAndCounts(t *testing.T) {
	var failing atomic.Bool
	inner := newEmbedder(t, embeddingsServer(t, &failing))
	m := metrics.New(nil)
	emb := m.Embedder(inner)
	if emb.Model() != inner.Model() || emb.Dim() != inner.Dim() {
		t.Errorf("model %q dim %d, want %q %d: Model and Dim must pass through", emb.Model(), emb.Dim(), inner.Model(), inner.Dim())
	}
	vecs, err := emb.Embed(context.Background(), []string{"one", "two", "three"})
	if err != nil || len(vecs) != 3 {
		t.Fatalf("embed: %d vectors, %v", len(vecs), err)
	}
	failing.Store(true)
	if _, err := emb.Embed(context.Background(), []string{"four"}); err == nil {
		t.Fatal("a refused request did not fail")
	}
	if got := counter(t, m, "ctxd_embedder_texts_total"); got != 3 {
		t.Errorf("texts = %v, want 3 (the failed call's text was not embedded)", got)
	}
	if got := counter(t, m, "ctxd_embedder_errors_total"); got != 1 {
		t.Errorf("errors = %v, want 1", got)
	}
	if got := histogramCount(t, m, "ctxd_embedder_duration_seconds", nil); got != 2 {
		t.Errorf("%d embed calls timed, want 2", got)
	}
}

func TestSummarizerTimesMethodsAndFallbacks(t *testing.T) {
	var failing atomic.Bool
	m := metrics.New(nil)
	tok := tokenizer.New()
	// The extractive summarizer falls back to shared terms when its embedder
	// fails, and says so in Note: that is a fallback, not an error.
	summ := m.Summarizer(summarize.NewExtractive(tok, m.Embedder(newEmbedder(t, embeddingsServer(t, &failing)))))
	msgs := []*memory.Message{
		{ID: "a", Role: memory.RoleUser, Content: "The deploy script lives in ops/deploy.sh and needs the staging key."},
		{ID: "b", Role: memory.RoleAssistant, Content: "Understood. I will run ops/deploy.sh against staging after the tests pass."},
		{ID: "c", Role: memory.RoleUser, Content: "Also bump the version in VERSION to 2.4.1 before tagging."},
	}
	req := memory.SummaryRequest{Messages: msgs, TargetTokens: 40, Encoding: memory.EncodingO200k}
	if s, err := summ.Summarize(context.Background(), req); err != nil || s.Note != "" {
		t.Fatalf("summary: note %q, err %v", s.Note, err)
	}
	failing.Store(true)
	// Other texts: the embedder keeps the vectors of texts it embedded
	// recently, so the same request would not reach the failing endpoint.
	down := req
	down.Messages = []*memory.Message{
		{ID: "d", Role: memory.RoleUser, Content: "The release checklist is in docs/release.md and needs two approvals."},
		{ID: "e", Role: memory.RoleAssistant, Content: "I will follow docs/release.md and ask for both approvals first."},
	}
	if s, err := summ.Summarize(context.Background(), down); err != nil || s.Note == "" {
		t.Fatalf("summary with the embedder down: note %q, err %v; want a fallback note", s.Note, err)
	}
	bad := req
	bad.TargetTokens = 0
	if _, err := summ.Summarize(context.Background(), bad); err == nil {
		t.Fatal("a summary of 0 tokens did not fail")
	}
	if got := histogramCount(t, m, "ctxd_summarizer_duration_seconds", map[string]string{"method": memory.SummaryExtractive}); got != 2 {
		t.Errorf("%d extractive summaries timed, want 2", got)
	}
	if got := histogramCount(t, m, "ctxd_summarizer_duration_seconds", map[string]string{"method": "error"}); got != 1 {
		t.Errorf("%d failed summaries timed, want 1", got)
	}
	if got := counter(t, m, "ctxd_summarizer_errors_total"); got != 1 {
		t.Errorf("errors = %v, want 1", got)
	}
	if got := counter(t, m, "ctxd_summarizer_fallbacks_total"); got != 1 {
		t.Errorf("fallbacks = %v, want 1", got)
	}
	if got := counter(t, m, "ctxd_embedder_errors_total"); got != 1 {
		t.Errorf("embedder errors = %v, want 1 (the summarizer's own embedder is instrumented too)", got)
	}
}

func TestNilMetricsReturnsAdaptersUnchanged(t *testing.T) {
	var m *metrics.Metrics
	var failing atomic.Bool
	e := newEmbedder(t, embeddingsServer(t, &failing))
	if m.Embedder(e) != e {
		t.Error("nil Metrics wrapped the embedder")
	}
	s := summarize.NewExtractive(tokenizer.New(), nil)
	if m.Summarizer(s) != memory.Summarizer(s) {
		t.Error("nil Metrics wrapped the summarizer")
	}
}
