package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/fakemodel"
)

// nodeSDKs are the official SDKs an agent written in JavaScript uses.
const nodeSDKs = `{"private": true, "type": "module", "dependencies": {"openai": "^7", "@anthropic-ai/sdk": "^1"}}`

// nodeScript calls ctxd through both SDKs, configured only by the two
// environment variables the README names for each.
const nodeScript = `
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
const oa = new OpenAI({ apiKey: 'sk-node' });
const first = await oa.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hello from node' }] });
const history = [{ role: 'user', content: 'hello from node' }, first.choices[0].message, { role: 'user', content: 'now stream' }];
let streamed = '';
for await (const ch of await oa.chat.completions.create({ model: 'gpt-4o', stream: true, messages: history })) {
  streamed += ch.choices[0]?.delta?.content ?? '';
}
const an = new Anthropic({ apiKey: 'sk-ant-node', maxRetries: 0 });
const m = await an.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 100, messages: [{ role: 'user', content: 'hello anthropic' }] });
let failed = '';
try {
  await an.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 100, messages: [{ role: 'user', content: 'fail please' }] });
} catch (e) { failed = String(e.status); }
console.log(JSON.stringify({ first: first.choices[0].message.content, streamed, anthropic: m.content[0].text, failed }));
`

// installNodeSDKs installs the SDKs from npm into a directory kept between
// runs; it skips the test where node or the registry is unreachable.
func installNodeSDKs(t *testing.T) string {
	return installNodePackages(t, "ctxd-gateway-node-sdks", nodeSDKs)
}

// installNodePackages installs the packages a package.json names into
// the cache directory dirName, kept between runs, and returns it; it skips
// the test with -short or where node or the registry is unreachable.
func installNodePackages(t *testing.T, dirName, packageJSON string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("installs npm packages (%s); skipped with -short", packageJSON)
	}
	// In CI (which has node and npm, and the registry) a missing tool or
	// a failed install fails the test rather than skipping it.
	skip := t.Skipf
	if os.Getenv("CI") != "" {
		skip = t.Fatalf
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			skip("%s is not installed: the Node SDK test needs node and npm", tool)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, dirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(packageJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		skip("npm could not install the SDKs (registry unreachable?): %v\n%s", err, out)
	}
	return dir
}

// runNodeScript writes script into dir (where installNodePackages put its
// packages) as name, runs it with env added, and returns what it printed.
func runNodeScript(t *testing.T, dir, name, script string, env ...string) []byte {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node %s: %v\n%s\n%s", name, err, out, stderr)
	}
	return out
}

func TestGatewayNodeSDKs(t *testing.T) {
	t.Parallel()
	dir := installNodeSDKs(t)
	up := fakemodel.NewRecorder(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		// The SDKs' own keys reach the upstream untouched.
		if key := fakemodel.AnthropicKey(r.Header); key != "sk-node" && key != "sk-ant-node" {
			http.Error(w, "unknown key "+key, http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/v1/chat/completions" && body["stream"] == true:
			w.Header().Set("Content-Type", "text/event-stream")
			for _, part := range []string{"streamed ", "from upstream"} {
				fakemodel.ChatChunk(w, fakemodel.DeltaChunk(map[string]any{"content": part}))
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		case r.URL.Path == "/v1/chat/completions":
			fakemodel.OpenAIAnswer(w, "hi node")
		case strings.Contains(fmt.Sprint(body["messages"]), "fail please"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
		default:
			fakemodel.AnthropicAnswer(w, map[string]any{"type": "text", "text": "hi from claude"})
		}
	})
	ts := startServer(t, t.TempDir(), func(c *Config) {
		c.UpstreamOpenAIURL = up.URL + "/v1"
		c.UpstreamAnthropicURL = up.URL
	})
	out := runNodeScript(t, dir, "gateway.mjs", nodeScript, "OPENAI_BASE_URL="+ts.URL+"/v1", "ANTHROPIC_BASE_URL="+ts.URL)
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %s: %v", out, err)
	}
	want := map[string]string{"first": "hi node", "streamed": "streamed from upstream", "anthropic": "hi from claude", "failed": "429"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	// The OpenAI conversation is one session (named by its first message):
	// both turns and both answers, each once.
	sessions := ts.mustDo(200, "GET", "/v1/sessions", nil)["sessions"].([]any)
	found := false
	for _, s := range sessions {
		id := s.(map[string]any)["id"].(string)
		var contents []string
		for _, m := range allMessages(ts, id) {
			contents = append(contents, m.Content)
		}
		if strings.Join(contents, "|") == "hello from node|hi node|now stream|streamed from upstream" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no session holds the OpenAI conversation once: %v", sessions)
	}
}
