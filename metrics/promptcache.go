package metrics

import (
	"sync"

	"github.com/ctxd/ctxd/memory"
	"github.com/prometheus/client_golang/prometheus"
)

// promptCache counts what the upstreams said of the gateway's prompts
// (the prompt-cache events), and derives the hit rate and the input cost
// saved since the start, as the session status derives them per session.
// A rate over a window is the counters' business:
// rate(ctxd_gateway_cache_read_tokens_total[1h]) / rate(ctxd_gateway_input_tokens_total[1h]).
type promptCache struct {
	calls, input, read, write prometheus.Counter

	mu    sync.Mutex
	total memory.PromptCache
}

func newPromptCache(reg prometheus.Registerer) *promptCache {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "gateway", Name: name, Help: help})
	}
	c := &promptCache{
		calls: counter("answers_with_usage_total", "Gateway answers whose upstream reported its prompt usage."),
		input: counter("input_tokens_total", "Prompt tokens of the gateway's answers, in the upstream's count (cached ones included)."),
		read:  counter("cache_read_tokens_total", "Prompt tokens the upstream read from its prompt cache (OpenAI cached_tokens, Anthropic cache_read_input_tokens)."),
		write: counter("cache_write_tokens_total", "Prompt tokens the upstream wrote to its prompt cache (Anthropic cache_creation_input_tokens)."),
	}
	ratio := func(name, help string, f func(*memory.PromptCache) float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "gateway", Name: name, Help: help},
			func() float64 {
				c.mu.Lock()
				t := c.total
				c.mu.Unlock()
				if r := t.WithRates(); r != nil {
					return f(r)
				}
				return 0
			})
	}
	reg.MustRegister(c.calls, c.input, c.read, c.write,
		ratio("prompt_cache_hit_ratio", "Share of the gateway's prompt tokens read from the upstream's cache, since the start.",
			func(r *memory.PromptCache) float64 { return r.HitRate }),
		ratio("input_cost_saved_ratio", "Share of the gateway's input cost the prompt cache saved since the start (cached reads billed at a tenth, cache writes at 1.25).",
			func(r *memory.PromptCache) float64 { return r.SavedPct / 100 }))
	return c
}

func (c *promptCache) observe(ev map[string]any) {
	in, _ := number(ev["input_tokens"])
	read, _ := number(ev["cache_read_tokens"])
	write, _ := number(ev["cache_write_tokens"])
	if in <= 0 || read < 0 || write < 0 {
		return
	}
	c.calls.Inc()
	c.input.Add(in)
	c.read.Add(read)
	c.write.Add(write)
	c.mu.Lock()
	c.total.Calls++
	c.total.InputTokens += int(in)
	c.total.CachedRead += int(read)
	c.total.CacheWrite += int(write)
	c.mu.Unlock()
}
