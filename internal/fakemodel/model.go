// Package fakemodel is a model API on loopback for end-to-end tests of real
// agent clients: it speaks Anthropic Messages, OpenAI Chat Completions and
// OpenAI Responses (each streamed and not), plays a scripted coding task of
// tool calls with the client's own tools, and checks every request the way
// the providers do (tool pairing, Anthropic's thinking-block rule, at most 4
// cache_control breakpoints, prompt + max_tokens within the window in its
// own token count). A request that breaks a rule is answered 400 in the
// provider's error shape and recorded, so a test can fail saying which rule.
package fakemodel

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ctxd/ctxd/tokenizer"
)

// Config is what a Model enforces and plays.
type Config struct {
	// Window is the model's context window in its own count: prompt +
	// max_tokens above it is refused, as the providers refuse it.
	Window int
	// Task is the scripted task the model plays.
	Task *Task
	// Instruction, when set, is the user's instruction: a main-loop
	// request without it is counted (Stats.WithoutInstruction), since a
	// real model that lost it no longer knows its task.
	Instruction string
}

// Model is the fake provider. It is an http.Handler: serve it with
// httptest.NewServer and give its URL as the upstream of both providers.
type Model struct {
	cfg Config
	tok *tokenizer.Tokenizer

	mu    sync.Mutex
	stats Stats
	// prev is the previous main-loop request's segments, per API, for the
	// cached-token count (the longest exact prefix).
	prev map[string][]segment
	// reasonedSteps are the steps answered with a reasoning item.
	reasonedSteps map[int]bool
}

// Stats is what the model saw.
type Stats struct {
	Calls      int      // every model request (main loop, side calls, flush turns)
	MainCalls  int      // requests of the task's tool loop
	SideCalls  int      // requests without the task's tools (titles, checks)
	FlushTurns int      // ctxd's flush turns (requests offering save_memory)
	Steps      int      // the highest step the model has asked for
	Completed  bool     // the model gave its final answer after the last step
	OverWindow int      // requests whose prompt + max_tokens passed the window
	MaxPrompt  int      // the largest prompt, in the model's count
	Prompts    []int    // every call's prompt, in the model's count
	Violations []string // every rule a request broke, with the call number
	Tools      []string // the tool names of the first main-loop request
	Models     int      // GET /v1/models calls
	Counts     int      // POST /v1/messages/count_tokens calls
	// WithoutInstruction counts the main-loop requests that lacked
	// Config.Instruction.
	WithoutInstruction int
}

// New returns a Model of cfg.
func New(cfg Config) *Model {
	return &Model{cfg: cfg, tok: tokenizer.New(), prev: map[string][]segment{}, reasonedSteps: map[int]bool{}}
}

// Stats returns a copy of what the model saw so far.
func (m *Model) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Violations = append([]string(nil), s.Violations...)
	s.Tools = append([]string(nil), s.Tools...)
	s.Prompts = append([]int(nil), s.Prompts...)
	return s
}

// ServeHTTP routes a request to the API its path names.
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if r.Method == http.MethodGet && strings.HasSuffix(path, "/models") {
		m.mu.Lock()
		m.stats.Models++
		m.mu.Unlock()
		writeJSON(w, 200, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "fake-model", "object": "model", "type": "model", "owned_by": "fakemodel", "created": 0},
		}})
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		writeJSON(w, 400, map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": "body is not JSON: " + err.Error()}})
		return
	}
	switch {
	case strings.HasSuffix(path, "/messages/count_tokens"):
		m.countTokens(w, body)
	case strings.HasSuffix(path, "/messages"):
		m.anthropic(w, body)
	case strings.HasSuffix(path, "/chat/completions"):
		m.chat(w, body)
	case strings.HasSuffix(path, "/responses"):
		m.responses(w, body)
	default:
		http.Error(w, "fakemodel: no route "+r.Method+" "+r.URL.Path, 404)
	}
}

// call is one request, read into what every API has in common.
type call struct {
	api       string // "anthropic", "chat", "responses"
	tools     []tool
	segments  []segment
	maxTokens int
	// results are the tool results of the request, in order: the call
	// id and the text the client sent back.
	results []result
	// thinking is set when the request asks for thinking/reasoning.
	thinking bool
}

type result struct{ id, text string }

// segment is one part of a prompt as the cache sees it: a prefix of equal
// segments is a cache hit.
type segment struct {
	text   string
	tokens int
	// breakpoint marks a segment that carries Anthropic's cache_control.
	breakpoint bool
}

// perMessage is what the model adds for each message's framing.
const perMessage = 4

// encoding is the model's own tokenizer: another than ctxd's default for
// OpenAI-style models, so that ctxd's counts and the model's differ.
const encoding = "cl100k_base"

// seg counts text as a segment.
func (m *Model) seg(text string) segment {
	n, err := m.tok.Count(encoding, text)
	if err != nil {
		panic(err) // a fixed, known encoding
	}
	return segment{text: text, tokens: n + perMessage}
}

// promptTokens sums the segments.
func promptTokens(segs []segment) int {
	n := 0
	for _, s := range segs {
		n += s.tokens
	}
	return n
}

// outcome is what the model decided to answer to a call.
type outcome struct {
	kind     string // "tool", "flush", "final", "side"
	step     int
	tool     tool
	args     string // the tool call's arguments, JSON
	text     string // the final or side answer
	thinking string // the thinking/reasoning text, when asked for
	prompt   int
	cached   int // prompt tokens read from the cache
	written  int // prompt tokens written to it (Anthropic's cache_creation_input_tokens)
	output   int
	overflow bool // refused for the window, not for a rule
}

// decide checks c against the rules every API shares, counts it, and picks
// the answer. It returns the violation that refuses the call, if any.
func (m *Model) decide(c *call) (outcome, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.Calls++
	n := m.stats.Calls
	o := outcome{prompt: promptTokens(c.segments)}
	m.stats.Prompts = append(m.stats.Prompts, o.prompt)
	if o.prompt > m.stats.MaxPrompt {
		m.stats.MaxPrompt = o.prompt
	}
	if limit := m.cfg.Window; o.prompt+c.maxTokens > limit {
		m.stats.OverWindow++
		o.overflow = true
		v := fmt.Sprintf("call %d (%s): prompt %d + max_tokens %d > window %d", n, c.api, o.prompt, c.maxTokens, limit)
		m.stats.Violations = append(m.stats.Violations, v)
		return o, v
	}
	switch {
	case hasTool(c.tools, "save_memory"):
		m.stats.FlushTurns++
		o.kind = "flush"
		o.tool = tool{name: "save_memory"}
		o.args = fmt.Sprintf(`{"note":"Task progress: %d of %d files read; each file's first line is its marker."}`, m.stats.Steps, m.cfg.Task.Steps)
	case pick(c.tools, shellNames) == nil && slices.ContainsFunc(c.results, func(r result) bool { _, ok := stepOf(r.id); return ok }):
		// The task's tool loop, but the client's tools are gone: someone
		// between the client and the model lost them.
		v := fmt.Sprintf("call %d (%s): the request carries the results of the task's tool calls but offers none of the shell tools %v (tools offered: %d)", n, c.api, shellNames, len(c.tools))
		m.stats.Violations = append(m.stats.Violations, v)
		return o, v
	case pick(c.tools, shellNames) == nil:
		m.stats.SideCalls++
		o.kind = "side"
		o.text = "Reading the workspace files"
	default:
		m.stats.MainCalls++
		if in := m.cfg.Instruction; in != "" && !slices.ContainsFunc(c.segments, func(s segment) bool { return strings.Contains(s.text, in) }) {
			m.stats.WithoutInstruction++
		}
		if m.stats.Tools == nil {
			for _, t := range c.tools {
				m.stats.Tools = append(m.stats.Tools, t.name)
			}
		}
		if v := m.checkResults(n, c); v != "" {
			m.stats.Violations = append(m.stats.Violations, v)
			return o, v
		}
		last := 0
		for _, r := range c.results {
			if k, ok := stepOf(r.id); ok {
				last = k
			}
		}
		if last >= m.cfg.Task.Steps {
			m.stats.Completed = true
			o.kind = "final"
			o.text = m.cfg.Task.Final()
		} else {
			o.kind = "tool"
			o.step = last + 1
			o.tool, o.args = m.cfg.Task.Action(o.step, c.tools)
			if o.step > m.stats.Steps {
				m.stats.Steps = o.step
			}
		}
		common := commonPrefix(m.prev[c.api], c.segments)
		if c.api == "anthropic" {
			o.cached, o.written = AnthropicCached(cacheSegments(m.prev[c.api]), cacheSegments(c.segments), common)
		} else {
			o.cached = OpenAICached(promptTokens(c.segments[:common]))
		}
		m.prev[c.api] = c.segments
	}
	if c.thinking {
		o.thinking = fmt.Sprintf("Call %d: the next thing to do is %s.", n, o.kind)
	}
	o.output = 20 + len(o.args)/4 + len(o.text)/4
	return o, ""
}

// checkResults checks that the newest result of the task's own calls
// carries its file's marker: what the client ran reached the model.
func (m *Model) checkResults(n int, c *call) string {
	for i := len(c.results) - 1; i >= 0; i-- {
		k, ok := stepOf(c.results[i].id)
		if !ok {
			continue
		}
		if want := m.cfg.Task.Marker(k); !strings.Contains(c.results[i].text, want) {
			return fmt.Sprintf("call %d (%s): the result of step %d lacks its marker %s: %.200q", n, c.api, k, want, c.results[i].text)
		}
		return ""
	}
	return ""
}

// violation records a rule broken outside decide (the API's own rules).
func (m *Model) violation(api, format string, args ...any) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.Calls++
	v := fmt.Sprintf("call %d (%s): ", m.stats.Calls, api) + fmt.Sprintf(format, args...)
	m.stats.Violations = append(m.stats.Violations, v)
	return v
}

// callID names step k's tool call; stepOf reads it back.
func callID(prefix string, k int) string { return fmt.Sprintf("%s_fm%03d", prefix, k) }

func stepOf(id string) (int, bool) {
	i := strings.LastIndex(id, "_fm")
	if i < 0 {
		return 0, false
	}
	// all the digits: a width of 3 read step 1000 as 100
	k, err := strconv.Atoi(id[i+3:])
	if err != nil || k <= 0 {
		return 0, false
	}
	return k, true
}

// secret signs thinking blocks and reasoning items: one sent back altered
// fails its check, as the providers' do.
var secret = []byte("fakemodel thinking signature")

func sign(text string) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes one server-sent event (event may be empty) and flushes it.
func sse(w http.ResponseWriter, event string, v any) {
	data, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", data)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
