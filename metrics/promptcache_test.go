package metrics_test

import (
	"strings"
	"testing"

	"github.com/ctxd/ctxd/eventlog"
	"github.com/ctxd/ctxd/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The prompt-cache events add up to the gateway's counters, and the hit
// rate and the input cost saved are derived from them as the session
// status derives its own.
func TestPromptCacheFromEvents(t *testing.T) {
	inner, err := eventlog.Open(t.TempDir(), eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	m := metrics.New(nil)
	log := m.EventLog(inner)
	for _, ev := range []map[string]any{
		// OpenAI: reads only.
		{"session": "a", "input_tokens": 2000, "cache_read_tokens": 1536, "cache_write_tokens": 0},
		// Anthropic: a write, then a read.
		{"session": "b", "input_tokens": 3000, "cache_read_tokens": 0, "cache_write_tokens": 2000},
		{"session": "b", "input_tokens": 3000, "cache_read_tokens": 2464, "cache_write_tokens": 0},
		// An answer without usage counts nothing.
		{"session": "c", "input_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0},
	} {
		if err := log.Log("prompt-cache", ev); err != nil {
			t.Fatal(err)
		}
	}
	// Reads 4,000 of 8,000 input tokens: hit 0.5. Saved: 4,000 x 0.9 less
	// 2,000 x 0.25 = 3,100 of 8,000 = 0.3875.
	want := `
# HELP ctxd_gateway_answers_with_usage_total Gateway answers whose upstream reported its prompt usage.
# TYPE ctxd_gateway_answers_with_usage_total counter
ctxd_gateway_answers_with_usage_total 3
# HELP ctxd_gateway_input_tokens_total Prompt tokens of the gateway's answers, in the upstream's count (cached ones included).
# TYPE ctxd_gateway_input_tokens_total counter
ctxd_gateway_input_tokens_total 8000
# HELP ctxd_gateway_cache_read_tokens_total Prompt tokens the upstream read from its prompt cache (OpenAI cached_tokens, Anthropic cache_read_input_tokens).
# TYPE ctxd_gateway_cache_read_tokens_total counter
ctxd_gateway_cache_read_tokens_total 4000
# HELP ctxd_gateway_cache_write_tokens_total Prompt tokens the upstream wrote to its prompt cache (Anthropic cache_creation_input_tokens).
# TYPE ctxd_gateway_cache_write_tokens_total counter
ctxd_gateway_cache_write_tokens_total 2000
# HELP ctxd_gateway_prompt_cache_hit_ratio Share of the gateway's prompt tokens read from the upstream's cache, since the start.
# TYPE ctxd_gateway_prompt_cache_hit_ratio gauge
ctxd_gateway_prompt_cache_hit_ratio 0.5
# HELP ctxd_gateway_input_cost_saved_ratio Share of the gateway's input cost the prompt cache saved since the start (cached reads billed at a tenth, cache writes at 1.25).
# TYPE ctxd_gateway_input_cost_saved_ratio gauge
ctxd_gateway_input_cost_saved_ratio 0.3875
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"ctxd_gateway_answers_with_usage_total", "ctxd_gateway_input_tokens_total", "ctxd_gateway_cache_read_tokens_total",
		"ctxd_gateway_cache_write_tokens_total", "ctxd_gateway_prompt_cache_hit_ratio", "ctxd_gateway_input_cost_saved_ratio"); err != nil {
		t.Error(err)
	}
}
