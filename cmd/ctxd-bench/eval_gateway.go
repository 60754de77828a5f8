package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/internal/fakemodel"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/metrics"
	"github.com/ctxd/ctxd/tokenizer"
	openai "github.com/sashabaranov/go-openai"
)

// `ctxd eval --agent --gateway` replays the recorded runs through the
// drop-in gateway (POST /v1/chat/completions) as an agent that never
// heard of ctxd sends them: its whole history on every call, through the
// go-openai client. The model behind the gateway is gatewayModel, in this
// process: it answers each call with the recorded next turn and keeps what
// it was sent, and the figures are measured on that, what a real model
// would have read. They are the replay's figures (needed-in-window beside
// the same baseline, latest present, invalid pairs), plus requests over
// the model's window and the gateway's own time per call, the round trip
// less the time spent in the model.

// gatewayModel is the upstream of the gateway replay: an OpenAI Chat
// Completions endpoint that answers with the turn it is given and keeps
// the last conversation request.
type gatewayModel struct {
	srv  *http.Server
	url  string // base URL as an OpenAI SDK takes it: ends in /v1
	tok  memory.Tokenizer
	busy time.Duration // time spent answering, summed

	mu         sync.Mutex
	next       openai.ChatCompletionMessage
	got        []openai.ChatCompletionMessage // the last conversation call's messages
	flushTurns int                            // calls that offered save_memory: the gateway's flush turns
	fault      error                          // a request it could not read
	// prev is the last conversation request's messages: the next one's
	// cached prefix is what it repeats of them, as OpenAI counts it.
	prev []openai.ChatCompletionMessage
	// prevBlocks is the same of an Anthropic request, block by block.
	prevBlocks []anthropicBlock
	// reported prompt, cached and cache-written tokens, summed
	promptSum, cachedSum, writeSum int
	// what the sessions' status measured of the same (prompt_cache)
	sessionInput, sessionCached, sessionWrite int
}

// openaiCachedPrefix is what OpenAI's prompt cache would serve of msgs after
// prev: the whole messages they share from the start, in 128-token steps,
// none under 1,024 tokens.
func openaiCachedPrefix(tok memory.Tokenizer, prev, msgs []openai.ChatCompletionMessage) int {
	n := 0
	for n < len(prev) && n < len(msgs) && reflect.DeepEqual(prev[n], msgs[n]) {
		n++
	}
	tokens, err := gatewayPromptTokens(tok, msgs[:n])
	if err != nil {
		return 0
	}
	return fakemodel.OpenAICached(tokens)
}

func startGatewayModel(tok memory.Tokenizer) (*gatewayModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gateway eval: model listen: %w", err)
	}
	m := &gatewayModel{url: "http://" + ln.Addr().String() + "/v1", tok: tok}
	m.srv = &http.Server{Handler: http.HandlerFunc(m.serve), ReadHeaderTimeout: time.Minute}
	go m.srv.Serve(ln) //nolint:errcheck // ends with Close
	return m, nil
}

func (m *gatewayModel) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() {
		m.mu.Lock()
		m.busy += time.Since(start)
		m.mu.Unlock()
	}()
	if strings.HasSuffix(r.URL.Path, "/v1/messages") {
		m.serveAnthropic(w, r)
		return
	}
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		m.mu.Lock()
		m.fault = errors.Join(m.fault, fmt.Errorf("the model could not read a request: %w", err))
		m.mu.Unlock()
		http.Error(w, `{"error":{"message":"unreadable request"}}`, http.StatusBadRequest)
		return
	}
	flush := slices.ContainsFunc(req.Tools, func(t openai.Tool) bool {
		return t.Function != nil && t.Function.Name == memory.SaveMemoryTool
	})
	m.mu.Lock()
	answer := m.next
	if flush {
		// The flush turn: a model with nothing it must keep saves nothing,
		// so the notes do not change the windows measured after it.
		m.flushTurns++
		answer = openai.ChatCompletionMessage{Role: "assistant", Content: "Nothing to save."}
	} else {
		m.got = req.Messages
	}
	m.mu.Unlock()
	prompt, err := gatewayPromptTokens(m.tok, req.Messages)
	if err != nil {
		http.Error(w, `{"error":{"message":"count"}}`, http.StatusInternalServerError)
		return
	}
	cached := 0
	if !flush {
		m.mu.Lock()
		cached = min(openaiCachedPrefix(m.tok, m.prev, req.Messages), prompt)
		m.prev = req.Messages
		m.promptSum += prompt
		m.cachedSum += cached
		m.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(openai.ChatCompletionResponse{ //nolint:errcheck // the gateway reads it
		ID: "chatcmpl-eval", Object: "chat.completion", Model: req.Model,
		Choices: []openai.ChatCompletionChoice{{Message: answer, FinishReason: openai.FinishReasonStop}},
		// What OpenAI would report for a model of o200k_base.
		Usage: openai.Usage{PromptTokens: prompt, CompletionTokens: 1, TotalTokens: prompt + 1,
			PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: cached}},
	})
}

// take returns what the last conversation call sent, and the time spent
// answering since the last take.
func (m *gatewayModel) take() ([]openai.ChatCompletionMessage, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	got, busy, fault := m.got, m.busy, m.fault
	m.got, m.busy, m.fault = nil, 0, nil
	return got, busy, fault
}

func (m *gatewayModel) close() error { return m.srv.Close() }

// gatewayPromptTokens is what msgs cost as a chat request in o200k_base,
// counted as ctxd counts a window (memory.MessageTokens each, plus the
// reply priming).
func gatewayPromptTokens(tok memory.Tokenizer, msgs []openai.ChatCompletionMessage) (int, error) {
	n := memory.ReplyPriming
	for _, om := range msgs {
		m := &memory.Message{Role: memory.Role(om.Role), Content: om.Content, ToolCallID: om.ToolCallID, Name: om.Name}
		for _, tc := range om.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, memory.ToolCall{ID: tc.ID, Type: string(tc.Type),
				Function: memory.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		c, err := memory.MessageTokens(tok, memory.EncodingO200k, m)
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// gatewaySend sends the model call of an agent whose history is msgs,
// asking maxTokens for the answer.
type gatewaySend func(ctx context.Context, msgs []openai.ChatCompletionMessage, maxTokens int) error

// openaiSender calls through go-openai, as an OpenAI agent does.
func openaiSender(cl *evalClient, hc *http.Client) gatewaySend {
	cfg := openai.DefaultConfig("sk-eval")
	cfg.BaseURL = strings.TrimRight(cl.BaseURL(), "/") + "/v1"
	cfg.HTTPClient = hc
	client := openai.NewClientWithConfig(cfg)
	return func(ctx context.Context, msgs []openai.ChatCompletionMessage, maxTokens int) error {
		_, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "gpt-4o",
			Messages: msgs, MaxCompletionTokens: maxTokens})
		return err
	}
}

// headerTransport sends the gateway's session and window headers on every
// request, as an agent configured with them would.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.header {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// runGatewayEval is runAgentEval through the gateway.
func runGatewayEval(ctx context.Context, o agentOptions, runs []agentRun) (_ *agentReport, err error) {
	tok := tokenizer.New()
	model, err := startGatewayModel(tok)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, model.close()) }()
	// The replay's own calls (session status) keep their connections:
	// the figures time the model calls, on their own client.
	var cl *evalClient
	anthropicURL := strings.TrimSuffix(model.url, "/v1") // as the Anthropic SDK takes it
	if o.Ctxd != "" {
		cl, err = connectEvalProcess(ctx, o.Ctxd, nil, "--upstream-openai-url", model.url, "--upstream-anthropic-url", anthropicURL)
	} else {
		cl, err = connectEval(ctx, "", nil, func(c *server.Config) {
			c.UpstreamOpenAIURL, c.UpstreamAnthropicURL = model.url, anthropicURL
		})
	}
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.close()) }()
	rep := &agentReport{Options: o, ServerDesc: cl.desc + ", through the gateway", Runs: len(runs)}
	start := time.Now()
	for k := range runs {
		if err := gatewayReplay(ctx, cl, model, tok, &runs[k], o, &rep.Acc); err != nil {
			return nil, err
		}
		if o.Progress != nil && (k+1)%10 == 0 {
			fmt.Fprintf(o.Progress, "... %d/%d runs, %.0fs\n", k+1, len(runs), time.Since(start).Seconds())
		}
	}
	rep.FlushTurns = model.flushTurns
	rep.CachedPrefixPct = pctOf(model.cachedSum, model.promptSum)
	rep.SessionCacheHitPct = pctOf(model.sessionCached, model.sessionInput)
	rep.CacheWritePct = pctOf(model.writeSum, model.promptSum)
	rep.ModelCostPerCall = math.RoundToEven((float64(model.promptSum-model.cachedSum) + agentCachedRead*float64(model.cachedSum)) / float64(max(1, rep.Acc.Calls)))
	// The check: what the sessions measured from the model's reports is
	// what the model reported, token for token.
	if model.sessionInput != model.promptSum || model.sessionCached != model.cachedSum || model.sessionWrite != model.writeSum {
		return nil, fmt.Errorf("gateway eval: the sessions' prompt_cache (input %d, read %d, written %d) is not what the model reported (%d, %d, %d)",
			model.sessionInput, model.sessionCached, model.sessionWrite, model.promptSum, model.cachedSum, model.writeSum)
	}
	if cl.srv != nil {
		if rep.StoreBytes, err = metrics.DirBytes(cl.srv.dir, 0)(); err != nil {
			return nil, fmt.Errorf("gateway eval: data dir: %w", err)
		}
	}
	return rep, nil
}

// gatewayReplay is one run through the gateway: before each assistant
// turn the agent sends its whole history, and the model answers with that
// turn.
func gatewayReplay(ctx context.Context, cl *evalClient, model *gatewayModel, tok memory.Tokenizer, run *agentRun,
	o agentOptions, acc *agentAcc) error {
	sid := agentSessionID(run.ID)
	if err := errNotFoundOK(cl.DeleteSession(ctx, sid)); err != nil {
		return fmt.Errorf("run %s: clear session: %w", run.ID, err)
	}
	// The model's window is the replay's window; what the agent asks to
	// keep for the answer leaves the replay's budget for the history.
	answer := o.Window - o.Budget
	hc := &http.Client{Timeout: 5 * time.Minute, Transport: &headerTransport{
		// A new connection per call, as in the replay of the context endpoint.
		base: &http.Transport{DisableKeepAlives: true},
		header: http.Header{httpapi.SessionHeader: {sid},
			httpapi.ContextWindowHeader: {strconv.Itoa(o.Window)}},
	}}
	send := openaiSender(cl, hc)
	if o.GatewayAPI == gatewayAnthropic {
		send = anthropicSender(cl, hc)
	}

	msgs := run.Messages
	history := make([]openai.ChatCompletionMessage, len(msgs))
	toks := make([]int, len(msgs))
	contentBytes := 0
	for i := range msgs {
		history[i] = openai.ChatCompletionMessage{Role: msgs[i].Role, Content: msgs[i].Content, ToolCallID: msgs[i].ToolCallID}
		for _, c := range msgs[i].calls {
			history[i].ToolCalls = append(history[i].ToolCalls, openai.ToolCall{ID: pyKey(c.ID), Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Function.Name, Arguments: c.Function.Arguments}})
		}
		// Each message's cost as the server counts it, for the baseline.
		n, err := gatewayPromptTokens(tok, history[i:i+1])
		if err != nil {
			return fmt.Errorf("run %s: count message %d: %w", run.ID, i, err)
		}
		toks[i] = n - memory.ReplyPriming
	}
	firstAsst := slices.IndexFunc(msgs, func(m agentMessage) bool { return m.Role == "assistant" })
	needs := newAgentNeeds(msgs, firstAsst)
	// The baselines' windows, for compact-at-limit's cost beside the
	// model's (ctxd's own view is what the model reports).
	cache := newAgentCache(msgs, toks, firstAsst, o.Budget)
	if o.GatewayAPI != gatewayAnthropic {
		// By the rule the model reports ctxd's by: the same provider
		// would serve compact-at-limit's prefix in the same steps.
		cache.cached = fakemodel.OpenAICached
	}
	var lat []float64
	stored := 0 // the messages the session holds after the last call
	noted := firstAsst
	for i, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		needs.note(noted, i)
		noted = i
		model.mu.Lock()
		model.next = history[i]
		model.mu.Unlock()
		t0 := time.Now()
		err := send(ctx, history[:i], answer)
		rtt := time.Since(t0)
		got, busy, fault := model.take()
		if err = errors.Join(err, fault); err != nil {
			return fmt.Errorf("run %s: call before message %d: %w", run.ID, i, err)
		}
		lat = append(lat, (rtt - busy).Seconds())
		acc.Calls++
		acc.Writes++
		for j := stored; j <= i; j++ { // the history not sent before, and the answer
			contentBytes += len(msgs[j].text())
		}
		stored = i + 1
		if len(got) == 0 {
			return fmt.Errorf("run %s: call before message %d: the model got no conversation request", run.ID, i)
		}
		sent, err := gatewayPromptTokens(tok, got)
		if err != nil {
			return err
		}
		if sent > o.Window-answer {
			acc.OverBudget++
		}
		win := make([]agentWindowMessage, len(got))
		texts := make([]string, len(got))
		for k, g := range got {
			win[k] = agentWindowMessage{Role: g.Role, Content: g.Content}
			if g.Role == "tool" {
				id := g.ToolCallID
				win[k].ToolCallID = &id
			}
			for _, tc := range g.ToolCalls {
				id := tc.ID
				c := agentToolCall{ID: &id}
				c.Function.Name, c.Function.Arguments = tc.Function.Name, tc.Function.Arguments
				win[k].ToolCalls = append(win[k].ToolCalls, c)
			}
			texts[k] = agentText(win[k].Content, win[k].ToolCalls)
		}
		// The message being answered is the last one sent, whole or cut.
		last, want := got[len(got)-1], history[i-1]
		if last.Role == want.Role && last.ToolCallID == want.ToolCallID {
			acc.LatestPresent++
			if last.Content == want.Content {
				acc.LatestWhole++
			}
		}
		acc.Invalid += agentInvalidPairs(win)
		cache.step(i, nil, acc)
		needs.count(i, needs.at(i), texts, agentBaseline(msgs, toks, firstAsst, i, o.Budget), nil, acc)

		st, err := cl.Session(ctx, sid)
		if err != nil {
			return fmt.Errorf("run %s: session status: %w", run.ID, err)
		}
		if float64(st.Tokens) > agentHardLimit*float64(o.Window) {
			acc.OverHardLimit++
		}
	}
	if st, err := cl.Session(ctx, sid); err == nil && st.PromptCache != nil {
		model.mu.Lock()
		model.sessionInput += st.PromptCache.InputTokens
		model.sessionCached += st.PromptCache.CachedRead
		model.sessionWrite += st.PromptCache.CacheWrite
		model.mu.Unlock()
	}
	return agentFinishRun(ctx, cl, run, stored, contentBytes, lat, acc)
}

// gatewayFigures are the figures of a replay through the gateway: the
// replay's, the context calls being the agent's model calls, with the
// gateway's time per call (less the model's) and its flush turns.
func gatewayFigures(r *agentReport, f jsonObject) jsonObject {
	out := jsonObject{{"through", "gateway"}}
	v := r.Acc.Views[viewCompact]
	compact := math.RoundToEven((float64(v.Tokens-v.Cached) + agentCachedRead*float64(v.Cached)) / float64(max(1, r.Acc.Calls)))
	for _, kv := range f {
		switch kv.Key {
		case "context_calls":
			kv.Key = "model_calls"
		case "over_budget_windows":
			kv.Key = "requests_over_window"
		case "context_ms_p50":
			kv.Key = "gateway_ms_p50"
		case "context_ms_p99":
			kv.Key = "gateway_ms_p99"
		case "context_latency_growth_median":
			kv.Key = "gateway_latency_growth_median"
		}
		out = append(out, kv)
	}
	if r.Options.GatewayAPI == gatewayAnthropic {
		out = append(out, jsonField{"api", gatewayAnthropic}, jsonField{"model_cache_write_pct", r.CacheWritePct})
	}
	return append(out, jsonField{"flush_turns", r.FlushTurns},
		// what the model reported cached (the longest whole-message prefix
		// of its previous request, as OpenAI caches), and what the
		// sessions' status measured from those reports: they must agree
		jsonField{"model_cached_prefix_pct", r.CachedPrefixPct},
		jsonField{"session_cache_hit_pct", r.SessionCacheHitPct},
		// the cost per call of what the model was sent, against
		// compact-at-limit's over the same calls, its cached prefix read
		// by the provider's rule the model applies (OpenAI's 1,024-token
		// floor and 128-token steps; Anthropic's agent marks its newest
		// message, so the whole shared prefix)
		jsonField{"model_cost_per_call", int(r.ModelCostPerCall)},
		jsonField{"compact_at_limit_cost_per_call", int(compact)},
		jsonField{"model_cost_vs_compact_at_limit", pyRound(r.ModelCostPerCall/math.Max(1, compact), 2)})
}
