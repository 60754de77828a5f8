package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/internal/fakemodel"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/tokenizer"
)

// claudeUpstream is a fake Anthropic Messages API that validates like the
// real one: roles alternate from a user turn, every tool_use has its
// tool_result in the next turn and every tool_result its tool_use in the
// turn before, with thinking on the final assistant turn starts with a
// thinking block whose signature is one it issued for that text, at most
// four cache_control breakpoints, budget_tokens under max_tokens, and the
// prompt plus max_tokens within the window in its own count (o200k_base
// plus a fifth, as a Claude tokenizer counts more). It answers thinking
// and a tool call until steps have run, then thinking and text; a flush
// turn with a save_memory call.
type claudeUpstream struct {
	*fakemodel.Recorder
	mu        sync.Mutex
	window    int
	steps     int
	step      int
	signed    map[string]string // signature -> thinking text
	overflows int
	rejected  []string
	prev      string // the last request's prompt, for the cache figures
	cached    int    // cache_read_input_tokens reported, in all
}

func (u *claudeUpstream) count(tok *tokenizer.Tokenizer, s string) int {
	n, _ := tok.Count("o200k_base", s)
	return n + n/5
}

func newClaudeUpstream(t *testing.T, window, steps int) *claudeUpstream {
	tok := tokenizer.New()
	u := &claudeUpstream{window: window, steps: steps, signed: map[string]string{}}
	fail := func(w http.ResponseWriter, msg string) {
		u.rejected = append(u.rejected, msg)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}})
	}
	u.Recorder = fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		u.mu.Lock()
		defer u.mu.Unlock()
		reqs := u.Requests()
		raw := reqs[len(reqs)-1].Raw
		var req struct {
			System    json.RawMessage `json:"system"`
			Tools     json.RawMessage `json:"tools"`
			MaxTokens int             `json:"max_tokens"`
			Thinking  *struct {
				Type   string `json:"type"`
				Budget int    `json:"budget_tokens"`
			} `json:"thinking"`
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Type         string          `json:"type"`
					Text         string          `json:"text"`
					Thinking     string          `json:"thinking"`
					Signature    string          `json:"signature"`
					ID           string          `json:"id"`
					Input        json.RawMessage `json:"input"`
					ToolUseID    string          `json:"tool_use_id"`
					Content      json.RawMessage `json:"content"`
					CacheControl json.RawMessage `json:"cache_control"`
				} `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			fail(w, "messages: Input should be a valid list: "+err.Error())
			return
		}
		if r.URL.RawQuery != "beta=true" || r.Header.Get("Anthropic-Beta") != "interleaved-thinking-2025-05-14" {
			fail(w, fmt.Sprintf("query %q anthropic-beta %q: not forwarded", r.URL.RawQuery, r.Header.Get("Anthropic-Beta")))
			return
		}
		thinking := req.Thinking != nil && req.Thinking.Type == "enabled"
		if thinking && req.Thinking.Budget >= req.MaxTokens {
			fail(w, "`max_tokens` must be greater than `thinking.budget_tokens`")
			return
		}
		tokens := u.count(tok, string(req.System)) + u.count(tok, string(req.Tools))
		breakpoints := strings.Count(string(req.System), `"cache_control"`) + strings.Count(string(req.Tools), `"cache_control"`)
		var uses map[string]bool
		last := ""
		lastAssistant := -1
		for i, m := range req.Messages {
			want := "user"
			if i%2 == 1 {
				want = "assistant"
			}
			if m.Role != want {
				fail(w, fmt.Sprintf("messages.%d: roles must alternate, starting with user", i))
				return
			}
			results := map[string]bool{}
			for j, b := range m.Content {
				if len(b.CacheControl) > 0 {
					breakpoints++
				}
				tokens += u.count(tok, b.Text+b.Thinking+string(b.Input)+string(b.Content))
				switch b.Type {
				case "thinking":
					if u.signed[b.Signature] != b.Thinking {
						fail(w, fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j))
						return
					}
				case "tool_result":
					if !uses[b.ToolUseID] {
						fail(w, fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID))
						return
					}
					results[b.ToolUseID] = true
				}
				last = b.Type + ":" + b.Text
			}
			if m.Role == "user" {
				for id := range uses {
					if !results[id] {
						fail(w, fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s", i, id))
						return
					}
				}
				uses = nil
				continue
			}
			lastAssistant = i
			uses = map[string]bool{}
			for _, b := range m.Content {
				if b.Type == "tool_use" {
					uses[b.ID] = true
				}
			}
		}
		if len(req.Messages)%2 == 0 {
			fail(w, "the last message must be the user's")
			return
		}
		if thinking && lastAssistant >= 0 {
			if c := req.Messages[lastAssistant].Content; len(c) == 0 || (c[0].Type != "thinking" && c[0].Type != "redacted_thinking") {
				fail(w, fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block.", lastAssistant, c[0].Type))
				return
			}
		}
		if breakpoints > 4 {
			fail(w, fmt.Sprintf("A maximum of 4 blocks with cache_control may be provided. Found %d.", breakpoints))
			return
		}
		if tokens+req.MaxTokens > u.window {
			u.overflows++
			fail(w, fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again", tokens, req.MaxTokens, u.window))
			return
		}
		n := len(u.signed) + 1
		think := fmt.Sprintf("Thinking %d about the next step.", n)
		sig := "sig-" + strconv.Itoa(n) + "-EqQBCkgIAxABGAIiQL"
		u.signed[sig] = think
		blocks := []any{map[string]any{"type": "thinking", "thinking": think, "signature": sig}}
		switch {
		case strings.Contains(last, "[ctxd] This conversation is about to be compacted"):
			blocks = append(blocks, map[string]any{"type": "tool_use", "id": "toolu_note" + strconv.Itoa(n), "name": "save_memory", "input": map[string]any{"note": "the task: find the failing part"}})
		case len(req.Tools) == 0:
			blocks = []any{map[string]any{"type": "text", "text": "Hunting the failing part"}}
		case u.step < u.steps:
			u.step++
			if u.step == u.steps {
				// a long plan before the last call: too long for the
				// window, it is cut, and its turn must still go whole
				blocks = append(blocks, map[string]any{"type": "text", "text": strings.Repeat("The plan, step by step, in detail. ", 1400)})
			}
			blocks = append(blocks, map[string]any{"type": "tool_use", "id": "toolu_" + strconv.Itoa(u.step), "name": "Bash",
				"input": map[string]any{"command": fmt.Sprintf("cd /repo && cat part%d.log", u.step), "description": "read a part"}})
		default:
			blocks = append(blocks, map[string]any{"type": "text", "text": "done"})
		}
		w.Header().Set("Content-Type", "application/json")
		// The cache serves the longest prefix this request shares with
		// the last one (the real one stops at a breakpoint: near enough).
		prompt := string(req.System) + string(req.Tools) + string(raw[strings.Index(string(raw), `"messages"`):])
		common := 0
		for common < len(prompt) && common < len(u.prev) && prompt[common] == u.prev[common] {
			common++
		}
		cached := min(u.count(tok, prompt[:common]), tokens)
		u.prev, u.cached = prompt, u.cached+cached
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_" + strconv.Itoa(n), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
			"content": blocks, "stop_reason": "tool_use", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": tokens - cached, "output_tokens": 20, "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}})
	})
	return u
}

// TestGatewayClaudeCodeDefaults runs a Claude Code-like session through
// POST /v1/messages?beta=true with its defaults (max_tokens 32,000,
// thinking on with a budget of 31,999, a system prompt of blocks with a
// cache_control breakpoint, anthropic-beta) in a 24,000-token window with
// ~1,000-token tool outputs: max_tokens is lowered to fit and said in
// X-Ctxd-Max-Tokens, the final assistant turn keeps its thinking block
// and signature through compactions, the breakpoints stay within four,
// and no request passes the window in the provider's count.
func TestGatewayClaudeCodeDefaults(t *testing.T) {
	t.Parallel()
	const window, steps = 24_000, 24
	up := newClaudeUpstream(t, window, steps)
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamAnthropicURL = up.URL })
	h := http.Header{"X-Api-Key": {"sk-ant-up"}, "Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"interleaved-thinking-2025-05-14"},
		"X-Ctxd-Context-Window": {strconv.Itoa(window)}, "X-Claude-Code-Session-Id": {"3f2a9c1e-claude"}}
	system := []any{
		map[string]any{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
		map[string]any{"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering tasks. " + strings.Repeat("Follow the instructions. ", 200),
			"cache_control": map[string]any{"type": "ephemeral"}},
	}
	tools := []any{map[string]any{"name": "Bash", "description": "Run a shell command. " + strings.Repeat("Use it well. ", 100),
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}
	messages := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Find the failing part.",
		"cache_control": map[string]any{"type": "ephemeral"}}}}}
	compactions, lowered, session := 0, "", ""
	for call := 1; call <= steps+1; call++ {
		status, hdr, body := fakemodel.Post(t, ts.URL+"/v1/messages?beta=true", h, map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 32000,
			"thinking": map[string]any{"type": "enabled", "budget_tokens": 31999}, "system": system, "tools": tools, "messages": messages,
			"metadata": map[string]any{"user_id": "user_abc_account__session_3f2a9c1e"}})
		if status != 200 {
			t.Fatalf("call %d: %d %s (upstream rejected %q)", call, status, body, up.rejected)
		}
		if hdr.Get("X-Ctxd-Compacted") == "true" {
			compactions++
		}
		lowered = hdr.Get("X-Ctxd-Max-Tokens")
		if session == "" {
			session = hdr.Get("X-Ctxd-Session")
		} else if hdr.Get("X-Ctxd-Session") != session {
			t.Fatalf("call %d: session %q, the first call's %q", call, hdr.Get("X-Ctxd-Session"), session)
		}
		if call == 3 {
			// A side call of the same CLI session (a title), with its
			// own system prompt: a session of its own, superseding
			// nothing of the main conversation's.
			status, hdr, body := fakemodel.Post(t, ts.URL+"/v1/messages?beta=true", h, map[string]any{"model": "claude-haiku-4-5", "max_tokens": 512,
				"system":   []any{map[string]any{"type": "text", "text": "Write a 5-word title for the conversation."}},
				"messages": []any{map[string]any{"role": "user", "content": "Find the failing part."}}})
			if status != 200 || hdr.Get("X-Ctxd-Session") == session {
				t.Fatalf("side call: %d %s, session %q (the main one %q)", status, body, hdr.Get("X-Ctxd-Session"), session)
			}
		}
		var ans struct {
			Content []map[string]any `json:"content"`
		}
		json.Unmarshal(body, &ans)
		for _, b := range ans.Content {
			if in, ok := b["input"].(map[string]any); ok {
				in["command"] = strings.TrimPrefix(in["command"].(string), "cd /repo && ")
			}
		}
		messages = append(messages, map[string]any{"role": "assistant", "content": ans.Content})
		tool := ans.Content[len(ans.Content)-1]
		if tool["type"] != "tool_use" {
			if call != steps+1 {
				t.Fatalf("answered text at call %d", call)
			}
			break
		}
		lines := make([]string, 70)
		for i := range lines {
			lines[i] = fmt.Sprintf("%s line %d: checksum %d status ok", tool["id"], i, i*7919%1000)
		}
		messages = append(messages, map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": tool["id"],
			"content": strings.Join(lines, "\n")}}})
	}
	// The client rewrote its own Bash inputs (as Claude Code drops "cd
	// <cwd> &&"): nothing of the conversation was stored twice.
	seen := map[string]bool{}
	for _, m := range ts.allMessages(session) {
		for _, c := range m.ToolCalls {
			id := c.ID
			if seen[id] {
				t.Fatalf("the call %s was stored twice: the client's rewrite of its own turn superseded the stored one", id)
			}
			seen[id] = true
		}
	}
	// The cache figures the upstream reported, kept per session (the side
	// call's and flush turns' in their own or not at all).
	pc := ts.session(session).PromptCache
	if pc == nil || pc.CachedRead <= 0 || pc.HitRate <= 0 || pc.Calls != steps+1 {
		t.Fatalf("prompt_cache %+v (the upstream reported %d cached tokens)", pc, up.cached)
	}
	t.Logf("prompt cache: %+v", *pc)
	if lowered == "" {
		t.Fatal("no X-Ctxd-Max-Tokens: max_tokens 32,000 was not lowered")
	}
	if sent := up.Last(t).Body["max_tokens"].(float64); strconv.Itoa(int(sent)) != lowered {
		t.Fatalf("upstream max_tokens %v, header %s", sent, lowered)
	}
	if up.overflows != 0 || len(up.rejected) != 0 {
		t.Fatalf("the upstream refused %d requests (%d over the window): %q", len(up.rejected), up.overflows, up.rejected)
	}
	// X-Ctxd-Compacted tells each compaction (here old tool outputs are
	// pruned in the window, and none is needed).
	if st := ts.session(session); st.Compactions != compactions {
		t.Fatalf("X-Ctxd-Compacted true on %d calls, the session compacted %v times", compactions, st.Compactions)
	}
}

// TestGatewayCountTokensAndModels: POST /v1/messages/count_tokens and GET
// /v1/models are forwarded with the caller's key, anthropic-* headers and
// query string (a count ctxd faked would turn a client's own compaction
// off); ctxd's own refusals on the provider routes come in the provider's
// error shape.
func TestGatewayCountTokensAndModels(t *testing.T) {
	t.Parallel()
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/messages/count_tokens":
			fmt.Fprintf(w, `{"input_tokens":%d}`, len(body["messages"].([]any))*100)
		default:
			http.Error(w, "unexpected "+r.URL.Path, 404)
		}
	})
	models := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":"gpt-5","object":"model"}],"auth":%q,"path":%q}`, r.Header.Get("Authorization"), r.URL.Path)
	}))
	t.Cleanup(models.Close)
	ts := startServer(t, t.TempDir(), func(c *server.Config) { c.UpstreamAnthropicURL = up.URL; c.UpstreamOpenAIURL = models.URL + "/v1" })
	h := http.Header{"X-Api-Key": {"sk-ant-up"}, "Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"token-counting-2024-11-01"}}
	status, _, body := fakemodel.Post(t, ts.URL+"/v1/messages/count_tokens?beta=true", h, map[string]any{"model": "claude-sonnet-4-5",
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if status != 200 || string(body) != `{"input_tokens":100}` {
		t.Fatalf("count_tokens: %d %s", status, body)
	}
	sent := up.Last(t)
	if sent.Query != "beta=true" || sent.Header.Get("Anthropic-Beta") != "token-counting-2024-11-01" || fakemodel.AnthropicKey(sent.Header) != "sk-ant-up" {
		t.Fatalf("forwarded query %q, beta %q, key %q", sent.Query, sent.Header.Get("Anthropic-Beta"), fakemodel.AnthropicKey(sent.Header))
	}
	req, _ := http.NewRequest("GET", ts.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer sk-openai")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]any
	json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if res.StatusCode != 200 || list["auth"] != "Bearer sk-openai" || list["path"] != "/v1/models" {
		t.Fatalf("models: %d %v", res.StatusCode, list)
	}
	// ctxd's own refusal on /v1/messages: Anthropic's shape.
	status, _, body = fakemodel.Post(t, ts.URL+"/v1/messages", h, map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 10,
		"messages": []any{map[string]any{"role": "robot", "content": "hi"}}})
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if json.Unmarshal(body, &e); status != 400 || e.Type != "error" || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "role") {
		t.Fatalf("bad role: %d %s", status, body)
	}
}
