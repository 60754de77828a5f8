package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/fakemodel"
)

// The agent tests run real coding-agent CLIs and the official SDKs, as
// installed from npm at the versions testdata/agents/package.json pins,
// through the gateway to a fake model (internal/fakemodel) that plays a
// long tool-loop task and checks every request as the providers do. They
// take minutes and install packages: `make test-agents` runs them
// (CTXD_AGENT_TESTS=1); `make test` skips them.

// agentSteps is the task's length: tool calls of 1k to 8k tokens each,
// about 190k tokens in all, so a 64k window compacts several times.
// CTXD_AGENT_STEPS shortens it while working on a client.
var agentSteps = func() int {
	if n, err := strconv.Atoi(os.Getenv("CTXD_AGENT_STEPS")); err == nil && n > 0 {
		return n
	}
	return 44
}()

// agentPrompt is the user's one instruction; the fake model knows the rest.
const agentPrompt = "Read every moduleNNN.txt file in this directory, one at a time, then say TASK COMPLETE."

// agentRun is one client's run: the fake model, the proxy that refuses
// outside traffic, ctxd, and a home and working directory of its own.
type agentRun struct {
	t      *testing.T
	window int
	model  *fakemodel.Model
	proxy  *fakemodel.Refuser
	ts     *testServer
	// base is where the clients send their calls: ctxd, or the fake model
	// itself with CTXD_AGENT_DIRECT=1 (to tell a client's or the fake
	// model's fault from ctxd's).
	base     string
	npm      string // where the packages are installed
	home     string
	work     string
	task     *fakemodel.Task
	proxyURL string
}

// newAgentRun skips unless CTXD_AGENT_TESTS=1, installs the packages and
// starts the servers; window is the model's and ctxd's context window.
func newAgentRun(t *testing.T, window int) *agentRun {
	t.Helper()
	if os.Getenv("CTXD_AGENT_TESTS") != "1" {
		t.Skip("real agent CLIs from npm take minutes: run with CTXD_AGENT_TESTS=1 (make test-agents)")
	}
	pkg, err := os.ReadFile(filepath.Join("testdata", "agents", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	a := &agentRun{t: t, window: window, npm: installNodePackages(t, "ctxd-agents-npm", string(pkg)),
		home: t.TempDir(), work: t.TempDir(), proxy: &fakemodel.Refuser{}}
	a.task, err = fakemodel.NewTask(a.work, agentSteps)
	if err != nil {
		t.Fatal(err)
	}
	a.model = fakemodel.New(fakemodel.Config{Window: window, Task: a.task, Instruction: agentPrompt})
	up := httptest.NewServer(dumping(t, a.model))
	t.Cleanup(up.Close)
	px := httptest.NewServer(a.proxy)
	t.Cleanup(px.Close)
	a.proxyURL = px.URL
	a.ts = startServer(t, t.TempDir(), func(c *Config) {
		c.UpstreamOpenAIURL = up.URL + "/v1"
		c.UpstreamAnthropicURL = up.URL
	})
	a.base = a.ts.URL
	if os.Getenv("CTXD_AGENT_DIRECT") == "1" {
		a.base = up.URL
	}
	return a
}

// dumping writes every request the model gets into the directory
// CTXD_AGENT_DUMP names, when set, as NNN-path.json: what a client and ctxd
// sent, to read when a run fails.
func dumping(t *testing.T, h http.Handler) http.Handler {
	dir := os.Getenv("CTXD_AGENT_DUMP")
	if dir == "" {
		return h
	}
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		name := fmt.Sprintf("%s-%03d%s.json", t.Name(), n.Add(1), strings.ReplaceAll(r.URL.Path, "/", "_"))
		if err := os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, "/", "_")), body, 0o644); err != nil {
			t.Error(err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// env is the environment of a client: its own HOME, every proxy variable
// pointing at the refuser (loopback, where ctxd is, goes direct), and every
// telemetry, update and error-report switch the clients document off.
func (a *agentRun) env(extra ...string) []string {
	env := []string{
		"HOME=" + a.home, "PATH=" + filepath.Join(a.npm, "node_modules", ".bin") + ":" + os.Getenv("PATH"),
		"XDG_CONFIG_HOME=" + filepath.Join(a.home, ".config"), "XDG_DATA_HOME=" + filepath.Join(a.home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(a.home, ".cache"), "TMPDIR=" + os.TempDir(), "TERM=dumb", "CI=1",
		"HTTPS_PROXY=" + a.proxyURL, "HTTP_PROXY=" + a.proxyURL, "ALL_PROXY=" + a.proxyURL,
		"https_proxy=" + a.proxyURL, "http_proxy=" + a.proxyURL, "all_proxy=" + a.proxyURL,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		"DO_NOT_TRACK=1", "OTEL_SDK_DISABLED=true", "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none",
		// Claude Code
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_BUG_COMMAND=1", "CLAUDE_CODE_ENABLE_TELEMETRY=0",
		// opencode
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1", "OPENCODE_DISABLE_SHARE=1",
		// pi
		"PI_OFFLINE=1", "PI_TELEMETRY=0", "PI_SKIP_VERSION_CHECK=1",
		// codex (its config.toml turns the rest off)
		"CODEX_HOME=" + filepath.Join(a.home, ".codex"),
	}
	return append(env, extra...)
}

// file writes a client's configuration under its home.
func (a *agentRun) file(rel, content string) {
	a.t.Helper()
	path := filepath.Join(a.home, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		a.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		a.t.Fatal(err)
	}
}

// run runs a client in the task's directory and returns what it printed.
func (a *agentRun) run(env []string, name string, args ...string) string {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if name != "node" {
		name = filepath.Join(a.npm, "node_modules", ".bin", name)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = a.work
	cmd.Env = env
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		a.t.Errorf("%s: %v\n%s", name, err, tail(string(out), 4000))
	}
	return string(out)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// compactions counts the compactions ctxd ran over every session the
// gateway made (their status), and logs each session.
func (a *agentRun) compactions() int {
	n := 0
	for _, raw := range a.ts.mustDo(200, "GET", "/v1/sessions", nil)["sessions"].([]any) {
		s := raw.(map[string]any)
		c, _ := s["compactions"].(float64)
		n += int(c)
		if os.Getenv("CTXD_AGENT_DEBUG") == "1" {
			for _, m := range allMessages(a.ts, s["id"].(string)) {
				a.t.Logf("  %v %v tokens %v state %v: %.80q", m.Role, m.Kind, m.Tokens, m.State, m.Content)
			}
		}
		a.t.Logf("session %v: window %v, tokens %v, messages %v, summaries %v, compactions %v",
			s["id"], s["context_window"], s["tokens"], s["messages"], s["summaries"], s["compactions"])
	}
	return n
}

// check asserts what every client's run must show and logs its figures.
func (a *agentRun) check(client string) {
	t := a.t
	t.Helper()
	s := a.model.Stats()
	comp := a.compactions()
	t.Logf("%s: calls %d (main %d, side %d, flush turns %d: %.1f per 100 client calls), steps %d/%d, completed %v, windows over the limit %d, largest prompt %d of %d, compactions %d, count_tokens %d, models %d, without the instruction %d, tools %v",
		client, s.Calls, s.MainCalls, s.SideCalls, s.FlushTurns, 100*float64(s.FlushTurns)/float64(max(1, s.Calls-s.FlushTurns)), s.Steps, agentSteps, s.Completed, s.OverWindow, s.MaxPrompt, a.window, comp, s.Counts, s.Models, s.WithoutInstruction, s.Tools)
	t.Logf("%s: prompts %v", client, s.Prompts)
	if att := a.proxy.Attempts(); len(att) > 0 {
		t.Logf("%s: %d outside calls refused by the proxy: %v", client, len(att), att)
	}
	for _, v := range s.Violations {
		t.Errorf("provider rule broken: %s", v)
	}
	if s.OverWindow > 0 {
		t.Errorf("%d windows over the limit in the provider's count", s.OverWindow)
	}
	if !s.Completed {
		t.Errorf("the task did not complete: the model reached step %d of %d", s.Steps, agentSteps)
	}
	// A flush turn is an extra model call the client never sees: at most
	// one per compaction cycle.
	if s.FlushTurns > comp+1 {
		t.Errorf("%d flush turns for %d compactions: more than one per compaction cycle", s.FlushTurns, comp)
	}
	if per100 := 100 * float64(s.FlushTurns) / float64(max(1, s.Calls-s.FlushTurns)); per100 > 5 {
		t.Errorf("%.1f flush turns per 100 client calls, want at most 5", per100)
	}
	if comp < 2 {
		t.Errorf("ctxd compacted %d times, want several", comp)
	}
}

// windowHeader is the ctxd header every client sends to set the window.
func (a *agentRun) windowHeader() string {
	return "X-Ctxd-Context-Window: " + strconv.Itoa(a.window)
}

func TestAgentClaudeCode(t *testing.T) {
	a := newAgentRun(t, 64000)
	out := a.run(a.env("ANTHROPIC_BASE_URL="+a.base, "ANTHROPIC_API_KEY=sk-ant-fake",
		"ANTHROPIC_CUSTOM_HEADERS="+a.windowHeader()),
		"claude", "-p", agentPrompt, "--allowedTools", "Bash,Read")
	if !strings.Contains(out, a.task.Final()) {
		t.Errorf("claude printed %s", tail(out, 2000))
	}
	a.check("claude-code")
}

func TestAgentCodex(t *testing.T) {
	a := newAgentRun(t, 64000)
	a.file(".codex/config.toml", fmt.Sprintf(`model_provider = "ctxd"
check_for_update_on_startup = false

[model_providers.ctxd]
name = "ctxd"
base_url = "%s/v1"
env_key = "CTXD_FAKE_OPENAI_KEY"
wire_api = "responses"
http_headers = { "X-Ctxd-Context-Window" = "%d" }

[analytics]
enabled = false

[otel]
exporter = "none"
`, a.base, a.window))
	out := a.run(a.env("CTXD_FAKE_OPENAI_KEY=sk-fake"), "codex", "exec", "--skip-git-repo-check", agentPrompt)
	if !strings.Contains(out, a.task.Final()) {
		t.Errorf("codex printed %s", tail(out, 2000))
	}
	a.check("codex")
}

// TestAgentOpencode runs opencode with a provider for ctxd as its docs
// show one: a model with no limit (opencode's default, under which it never
// compacts on its own), and one whose limit is the window, under which
// opencode summarizes its own history once its prompt nears the limit.
func TestAgentOpencode(t *testing.T) {
	for name, limit := range map[string]string{"default": "", "limit": `, "limit": {"context": 64000, "output": 8192}`} {
		t.Run(name, func(t *testing.T) {
			a := newAgentRun(t, 64000)
			a.file(".config/opencode/opencode.json", fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "model": "ctxd/fake-model",
  "provider": {
    "ctxd": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "ctxd",
      "options": {"baseURL": "%s/v1", "apiKey": "sk-fake", "headers": {"X-Ctxd-Context-Window": "%d"}},
      "models": {"fake-model": {"name": "Fake model"%s}}
    }
  }
}`, a.base, a.window, limit))
			out := a.run(a.env(), "opencode", "run", agentPrompt)
			if !strings.Contains(out, a.task.Final()) {
				t.Errorf("opencode printed %s", tail(out, 2000))
			}
			a.check("opencode-" + name)
		})
	}
}

func TestAgentPi(t *testing.T) {
	a := newAgentRun(t, 64000)
	a.file(".pi/agent/models.json", fmt.Sprintf(`{"providers": {"ctxd": {
  "baseUrl": "%s/v1", "api": "openai-completions", "apiKey": "sk-fake",
  "headers": {"X-Ctxd-Context-Window": "%d"},
  "models": [{"id": "fake-model", "contextWindow": %d}]}}}`, a.base, a.window, a.window))
	out := a.run(a.env(), "pi", "--provider", "ctxd", "--model", "fake-model", "-p", agentPrompt)
	if !strings.Contains(out, a.task.Final()) {
		t.Errorf("pi printed %s", tail(out, 2000))
	}
	a.check("pi")
}
