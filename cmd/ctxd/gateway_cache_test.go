package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/fakemodel"
	"github.com/ctxd/ctxd/internal/numfmt"
	"github.com/ctxd/ctxd/internal/server/servertest"
	openai "github.com/sashabaranov/go-openai"
)

// A tool loop through the gateway to a model that reports its prompt
// cache as OpenAI does: the cached tokens it reported add up in the
// session's status, in /metrics and on the dashboard, beside the window
// gauges.
func TestGatewayPromptCacheShown(t *testing.T) {
	t.Parallel()
	task, err := fakemodel.NewTask(t.TempDir(), 6)
	if err != nil {
		t.Fatal(err)
	}
	model := fakemodel.New(fakemodel.Config{Window: 128000, Task: task})
	up := httptest.NewServer(model)
	t.Cleanup(up.Close)
	ts := startServer(t, t.TempDir(), func(c *Config) { c.UpstreamOpenAIURL = up.URL + "/v1" })
	const session = "cache-loop"
	client, _ := fakemodel.OpenAIClient(ts.URL+"/v1", "sk-test", http.Header{"X-Ctxd-Session": {session}})

	// A system prompt of about 2,000 tokens, the prefix every call repeats.
	system := strings.Repeat("Work in small steps and report what each file holds. ", 200)
	msgs := []openai.ChatCompletionMessage{{Role: "system", Content: system}, {Role: "user", Content: "Read the module files."}}
	tools := []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "bash",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}}
	var prompt, cached int
	for k := 1; k <= 4; k++ {
		res, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "gpt-4o", Messages: msgs, Tools: tools})
		if err != nil {
			t.Fatalf("call %d: %v", k, err)
		}
		prompt += res.Usage.PromptTokens
		if d := res.Usage.PromptTokensDetails; d != nil {
			cached += d.CachedTokens
		}
		answer := res.Choices[0].Message
		if len(answer.ToolCalls) != 1 {
			t.Fatalf("call %d: answer %+v, want a tool call", k, answer)
		}
		msgs = append(msgs, answer, openai.ChatCompletionMessage{Role: "tool", ToolCallID: answer.ToolCalls[0].ID,
			Content: task.Marker(k) + "\n" + strings.Repeat(fmt.Sprintf("line %d of the output\n", k), 40)})
	}
	if v := model.Stats().Violations; len(v) > 0 {
		t.Fatalf("the model refused: %v", v)
	}
	if cached == 0 || cached >= prompt {
		t.Fatalf("the model reported %d of %d prompt tokens cached: the test needs some, not all", cached, prompt)
	}
	hit := float64(cached) / float64(prompt)

	st := ts.mustDo(200, "GET", "/v1/sessions/"+session, nil)
	pc, _ := st["prompt_cache"].(map[string]any)
	if pc == nil || pc["calls"] != 4.0 || pc["input_tokens"] != float64(prompt) || pc["cache_read_tokens"] != float64(cached) {
		t.Fatalf("status prompt_cache %v, want 4 calls, %d input, %d read", pc, prompt, cached)
	}

	fams := servertest.Scrape(t, ts.URL)
	for name, want := range map[string]float64{
		"ctxd_gateway_answers_with_usage_total": 4, "ctxd_gateway_input_tokens_total": float64(prompt),
		"ctxd_gateway_cache_read_tokens_total": float64(cached), "ctxd_gateway_cache_write_tokens_total": 0,
	} {
		if got := servertest.MetricValue(fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := servertest.MetricValue(fams, "ctxd_gateway_prompt_cache_hit_ratio", nil); got < hit-0.0001 || got > hit+0.0001 {
		t.Errorf("ctxd_gateway_prompt_cache_hit_ratio = %v, want %.4f", got, hit)
	}
	// Reads billed at a tenth: 90% of what was read is saved.
	if got := servertest.MetricValue(fams, "ctxd_gateway_input_cost_saved_ratio", nil); got < 0.9*hit-0.0001 || got > 0.9*hit+0.0001 {
		t.Errorf("ctxd_gateway_input_cost_saved_ratio = %v, want %.4f", got, 0.9*hit)
	}

	// The dashboard shows the status's figures (rounded as it rounds them).
	if h, _ := pc["hit_rate"].(float64); h < hit-0.0001 || h > hit+0.0001 {
		t.Fatalf("status hit_rate %v, want %.4f", pc["hit_rate"], hit)
	}
	shown := fmt.Sprintf("%.1f%%", pc["hit_rate"].(float64)*100)
	saved := fmt.Sprintf("%.1f%%", pc["input_cost_saved_pct"].(float64))
	for path, want := range map[string]string{
		"/ui/":                    fmt.Sprintf("Prompt cache, all sessions: <b>%s</b> of %s input tokens", shown, numfmt.Thousands(prompt)),
		"/ui/sessions/" + session: fmt.Sprintf("prompt cache <b>%s</b> hit · <b>%s</b> of input cost saved", shown, saved),
	} {
		res, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), want) {
			i := max(0, strings.Index(string(body), "rompt cache")-20)
			t.Errorf("GET %s: %d, lacks %q: %.300s", path, res.StatusCode, want, string(body)[i:])
		}
	}
}
