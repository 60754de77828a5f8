package fakemodel

import (
	"strings"
	"testing"
)

// The cached tokens reported follow the providers' rules: OpenAI's shared
// prefix from 1,024 tokens on in steps of 128; Anthropic's prefixes
// written at breakpoints and read at a later breakpoint.
func TestPromptCacheRules(t *testing.T) {
	m, srv := newModel(t, 200000)
	long := strings.Repeat("the parser reads a token from the buffer ", 150) // about 1,200 tokens
	usage := func(path, body string) map[string]any {
		t.Helper()
		status, out := post(t, srv.URL+path, body)
		if status != 200 {
			t.Fatalf("%s: %d %v", path, status, out)
		}
		return out["usage"].(map[string]any)
	}
	num := func(u map[string]any, keys ...string) int {
		for _, k := range keys {
			if d, ok := u[k].(map[string]any); ok {
				u = d
				continue
			}
			return int(u[k].(float64))
		}
		return -1
	}

	fn := `"tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]`
	chat := func(msgs string) map[string]any {
		return usage("/v1/chat/completions", `{`+fn+`, "messages": [`+msgs+`]}`)
	}
	short := `{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}`
	chat(short)
	if n := num(chat(short+`, {"role": "user", "content": "more"}`), "prompt_tokens_details", "cached_tokens"); n != 0 {
		t.Errorf("OpenAI: a shared prefix under 1,024 tokens: %d cached, want 0", n)
	}
	sys := `{"role": "system", "content": "` + long + `"}`
	first := chat(sys + `, {"role": "user", "content": "go"}`)
	second := chat(sys + `, {"role": "user", "content": "go"}, {"role": "user", "content": "and more"}`)
	shared := num(first, "prompt_tokens") // the whole first request is the shared prefix
	if n := num(second, "prompt_tokens_details", "cached_tokens"); n != shared/128*128 || n < 1024 {
		t.Errorf("OpenAI: %d cached of a shared prefix of %d tokens, want %d", n, shared, shared/128*128)
	}

	msgs := func(cc string) string {
		return `{"max_tokens": 100, ` + bashTool + `, "system": [{"type": "text", "text": "` + long + `"` + cc + `}], "messages": [{"role": "user", "content": "go"}]}`
	}
	const bp = `, "cache_control": {"type": "ephemeral"}`
	if u := usage("/v1/messages", msgs("")); num(u, "cache_creation_input_tokens") != 0 || num(u, "cache_read_input_tokens") != 0 {
		t.Errorf("Anthropic without breakpoints: %v, want nothing cached or written", u)
	}
	if u := usage("/v1/messages", msgs("")); num(u, "cache_read_input_tokens") != 0 {
		t.Errorf("Anthropic without breakpoints, the same request again: %v, want nothing read", u)
	}
	w := usage("/v1/messages", msgs(bp))
	written := num(w, "cache_creation_input_tokens")
	if written < 1024 || num(w, "cache_read_input_tokens") != 0 {
		t.Errorf("Anthropic, a breakpoint after the system prompt: %v, want the prefix written", w)
	}
	r := usage("/v1/messages", msgs(bp))
	if num(r, "cache_read_input_tokens") != written || num(r, "cache_creation_input_tokens") != 0 {
		t.Errorf("Anthropic, the same prefix again: %v, want %d read", r, written)
	}
	if in := num(r, "input_tokens"); in+written != m.Stats().Prompts[len(m.Stats().Prompts)-1] {
		t.Errorf("Anthropic: input_tokens %d + read %d is not the prompt", in, written)
	}
}
