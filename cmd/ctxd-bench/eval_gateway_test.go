package main

import (
	"context"
	"math"
	"testing"
)

// The gateway replay in both APIs: the model reports its prompt cache by
// the provider's rules, the sessions' status measures the same from those
// reports (the replay fails when they differ), and the Anthropic agent's
// calls show the model what the OpenAI one's do.
func TestEvalGatewayPromptCache(t *testing.T) {
	t.Parallel()
	runs := writeAgentRun(t, "gw-cache")
	figures := map[string]map[string]any{}
	for _, api := range []string{gatewayOpenAI, gatewayAnthropic} {
		rep, err := runAgentEval(context.Background(), agentOptions{Runs: runs, Window: 16000, Budget: 12000, Gateway: true, GatewayAPI: api})
		if err != nil {
			t.Fatalf("%s: %v", api, err)
		}
		f := figureMap(rep)
		figures[api] = f
		if c, _ := f["model_cached_prefix_pct"].(float64); c <= 0 || c != f["session_cache_hit_pct"] {
			t.Errorf("%s: the model reported %v%% cached, the sessions measured %v%%", api, f["model_cached_prefix_pct"], f["session_cache_hit_pct"])
		}
		// The cost per call of what the model was sent, from its own
		// prompt and cached counts, against compact-at-limit's.
		mc, _ := f["model_cost_per_call"].(int)
		cc, _ := f["compact_at_limit_cost_per_call"].(int)
		if mc <= 0 || cc <= 0 || f["model_cost_vs_compact_at_limit"] != math.Round(100*float64(mc)/float64(cc))/100 {
			t.Errorf("%s: model cost per call %v, compact-at-limit's %v, ratio %v", api, f["model_cost_per_call"], f["compact_at_limit_cost_per_call"], f["model_cost_vs_compact_at_limit"])
		}
		checkFigures(t, api, f, map[string]any{"model_calls": 8, "requests_over_window": 0, "invalid_pairs": 0, "latest_present_pct": 100.0})
	}
	a := figures[gatewayAnthropic]
	// Compact-at-limit's prefix is read by the same provider rule as
	// ctxd's: OpenAI's floor and steps serve less of it than Anthropic's
	// breakpoint on the newest message.
	if o, an := figures[gatewayOpenAI]["compact_at_limit_cost_per_call"].(int), a["compact_at_limit_cost_per_call"].(int); o <= an {
		t.Errorf("compact-at-limit's cost per call: openai %d, anthropic %d; want OpenAI's rule to serve less", o, an)
	}
	if w, _ := a["model_cache_write_pct"].(float64); w <= 0 {
		t.Errorf("anthropic: cache writes %v%%: the agent's breakpoint on its newest message writes what was not read", w)
	}
	for _, k := range []string{"needed_in_window_pct", "needed_tokens", "latest_whole_pct"} {
		if a[k] != figures[gatewayOpenAI][k] {
			t.Errorf("%s: anthropic %v, openai %v", k, a[k], figures[gatewayOpenAI][k])
		}
	}
	if _, err := runAgentEval(context.Background(), agentOptions{Runs: runs, Window: 16000, Budget: 12000, GatewayAPI: gatewayAnthropic}); err == nil {
		t.Error("--gateway-api without --gateway: no error")
	}
}
