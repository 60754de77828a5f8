package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/internal/server/servertest"
)

const (
	keyA     = "key-of-tenant-a-0123456789"
	keyB     = "key-of-tenant-b-0123456789"
	keyAdmin = "key-of-the-admin-0123456789"
)

func startWithKeys(t *testing.T, mutate ...func(*Config)) *testServer {
	t.Helper()
	keys, err := httpapi.ParseKeys("a:" + keyA + ",b:" + keyB + ",*:" + keyAdmin)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, t.TempDir(), append([]func(*Config){func(c *Config) { c.Keys = keys }}, mutate...)...)
}

func TestAuthNeedsAValidKey(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		ts.mustDo(200, "GET", path, nil)
	}
	anon := ts.do("GET", "/v1/sessions", nil)
	if anon.Status != 401 || anon.errCode() != "unauthorized" {
		t.Fatalf("no key: %d %s", anon.Status, anon.Raw)
	}
	for _, h := range []string{"Bearer wrong-key-0123456789", "Basic " + keyA, keyA, "Bearer ", "Bearer " + keyA + "x"} {
		c := *ts
		c.Header = http.Header{"Authorization": {h}}
		for _, r := range []struct{ method, path string }{{"GET", "/v1/sessions"}, {"GET", "/openapi.json"},
			{"POST", "/v1/search"}, {"POST", "/v1/sessions/s/messages"}, {"DELETE", "/v1/sessions/s"}} {
			got := c.do(r.method, r.path, map[string]any{"query": "x", "messages": []any{msg("user", "hi")}})
			if got.Status != 401 || got.errCode() != "unauthorized" {
				t.Errorf("%q %s %s: %d %s, want 401", h, r.method, r.path, got.Status, got.Raw)
			}
		}
	}
	// Nothing was written by the refused requests.
	if got := ts.as(keyA).search(map[string]any{"query": "hi"}); len(got) != 0 {
		t.Fatalf("a refused write was stored: %v", got)
	}
	ts.as(keyA).mustDo(200, "GET", "/openapi.json", nil)
}

// Two tenants use the same session id; every route must keep them apart:
// one subtest per route, each ending with tenant a's data unchanged.
func TestTenantIsolationPerRoute(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	a, b := ts.as(keyA), ts.as(keyB)
	a.mustDo(200, "PUT", "/v1/sessions/shared", map[string]any{"context_window": 4096})
	aIDs := a.store("shared", msg("user", "alpha launch code is marmalade"), msg("assistant", "noted the marmalade code"))
	aIDs = append(aIDs, a.store("aonly", msg("user", "alpha private plan with pineapple"))...)
	b.store("shared", msg("user", "bravo likes turnips"))
	// A session of a's with cold chunks, for the cold and recover routes.
	a.mustDo(200, "PUT", "/v1/sessions/acold", map[string]any{"context_window": 1500})
	for i := range 40 {
		a.store("acold", msg("user", chatter(i)))
	}
	var coldIDs []string
	for _, c := range a.mustDo(200, "GET", "/v1/sessions/acold/cold?limit=1000", nil)["chunks"].([]any) {
		coldIDs = append(coldIDs, c.(map[string]any)["id"].(string))
	}
	if len(coldIDs) == 0 {
		t.Fatal("no cold chunks in a's session")
	}
	aIDs = append(aIDs, coldIDs...)
	snapshotA := func(a *testServer) string { return a.snapshot("shared") + a.snapshot("aonly") + a.snapshot("acold") }
	snapA := snapshotA(a)

	route := func(name string, fn func(t *testing.T, a, b *testServer)) {
		t.Run(name, func(t *testing.T) {
			a, b := a.on(t), b.on(t)
			fn(t, a, b)
			if got := snapshotA(a); got != snapA {
				t.Fatalf("tenant b's requests changed tenant a's data:\nbefore %s\nafter  %s", snapA, got)
			}
		})
	}
	route("GET /v1/sessions/{id}", func(t *testing.T, a, b *testServer) {
		if r := b.do("GET", "/v1/sessions/aonly", nil); r.Status != 404 {
			t.Errorf("GET another tenant's session: %d", r.Status)
		}
		st := b.mustDo(200, "GET", "/v1/sessions/shared", nil)
		if n := st["messages"].(map[string]any)["active"].(float64); n != 1 {
			t.Errorf("b's shared session shows %v active messages, want its own 1", n)
		}
	})
	route("GET /v1/sessions", func(t *testing.T, a, b *testServer) {
		if list := b.mustDo(200, "GET", "/v1/sessions", nil); strings.Contains(fmt.Sprint(list), "aonly") {
			t.Errorf("list shows another tenant's session: %v", list)
		}
	})
	route("GET /v1/sessions/{id}/messages", func(t *testing.T, a, b *testServer) {
		if ms := b.mustDo(200, "GET", "/v1/sessions/shared/messages?state=all", nil); strings.Contains(fmt.Sprint(ms), "marmalade") {
			t.Errorf("messages show another tenant's content")
		}
		if r := b.do("GET", "/v1/sessions/aonly/messages", nil); r.Status != 404 {
			t.Errorf("list another tenant's messages: %d %s", r.Status, r.Raw)
		}
	})
	route("GET /v1/messages/{id}", func(t *testing.T, a, b *testServer) {
		for _, id := range aIDs {
			if r := b.do("GET", "/v1/messages/"+id, nil); r.Status != 404 {
				t.Errorf("look up another tenant's message %s: %d %s", id, r.Status, r.Raw)
			}
			a.mustDo(200, "GET", "/v1/messages/"+id, nil)
		}
	})
	route("POST /v1/search", func(t *testing.T, a, b *testServer) {
		for _, req := range []map[string]any{{"query": "marmalade"}, {"query": "pineapple", "session_id": "aonly"},
			{"query": "marmalade", "sessions": []string{"shared", "aonly"}}, {"query": "alpha", "mode": "vector"}} {
			for _, r := range b.search(req) {
				if strings.Contains(r.Content, "alpha") {
					t.Errorf("search %v found another tenant's message %v", req, r)
				}
			}
		}
	})
	route("POST /v1/sessions/{id}/context", func(t *testing.T, a, b *testServer) {
		ctx := b.mustDo(200, "POST", "/v1/sessions/shared/context", map[string]any{"prompt": "what is the marmalade launch code?"})
		if strings.Contains(fmt.Sprint(ctx["messages"]), "marmalade") {
			t.Errorf("context of b's session carries a's messages")
		}
		if r := b.do("POST", "/v1/sessions/aonly/context", map[string]any{"prompt": "plan?"}); strings.Contains(string(r.Raw), "pineapple") {
			t.Errorf("context on another tenant's session: %d %s", r.Status, r.Raw)
		}
	})
	route("POST /v1/sessions/{id}/compact", func(t *testing.T, a, b *testServer) {
		if r := b.do("POST", "/v1/sessions/aonly/compact", map[string]any{}); r.Status != 404 {
			t.Errorf("compact another tenant's session: %d %s", r.Status, r.Raw)
		}
		b.mustDo(200, "POST", "/v1/sessions/shared/compact", map[string]any{})
	})
	route("GET /v1/sessions/{id}/cold", func(t *testing.T, a, b *testServer) {
		if r := b.do("GET", "/v1/sessions/acold/cold", nil); r.Status != 404 {
			t.Errorf("cold listing of another tenant's session: %d %s", r.Status, r.Raw)
		}
	})
	route("POST /v1/sessions/{id}/messages/{id}/recover", func(t *testing.T, a, b *testServer) {
		for _, id := range aIDs {
			for _, sess := range []string{"shared", "aonly", "acold"} {
				if r := b.do("POST", "/v1/sessions/"+sess+"/messages/"+id+"/recover", nil); r.Status != 404 {
					t.Errorf("recover another tenant's message %s in %s: %d %s", id, sess, r.Status, r.Raw)
				}
			}
		}
	})
	route("GET /v1/events/{stream}", func(t *testing.T, a, b *testServer) {
		if evs := a.mustDo(200, "GET", "/v1/events/health", nil); len(evs["events"].([]any)) == 0 {
			t.Errorf("tenant a sees none of its own context-health events")
		}
		for _, stream := range []string{"compaction", "health", "drops", "recoveries", "purges"} {
			for _, q := range []string{"", "?session_id=aonly", "?session_id=shared"} {
				evs := b.mustDo(200, "GET", "/v1/events/"+stream+q, nil)
				for _, ev := range evs["events"].([]any) {
					if e := ev.(map[string]any); e["tenant"] != "b" {
						t.Errorf("events/%s%s shows another tenant's event %v", stream, q, e)
					}
				}
			}
		}
	})
	route("PUT /v1/sessions/{id}", func(t *testing.T, a, b *testServer) {
		b.mustDo(200, "PUT", "/v1/sessions/shared", map[string]any{"context_window": 8192})
		b.mustDo(200, "PUT", "/v1/sessions/aonly", map[string]any{"context_window": 9000}) // b's own, new
	})
	route("POST /v1/sessions/{id}/messages", func(t *testing.T, a, b *testServer) {
		b.store("shared", msg("user", "bravo again"))
		b.store("aonly", msg("user", "bravo in a session id a also uses"))
	})
	route("DELETE /v1/sessions/{id}", func(t *testing.T, a, b *testServer) {
		b.mustDo(204, "DELETE", "/v1/sessions/shared", nil)
		b.mustDo(204, "DELETE", "/v1/sessions/aonly", nil)
		if r := b.do("DELETE", "/v1/sessions/aonly", nil); r.Status != 404 {
			t.Errorf("delete twice: %d", r.Status)
		}
		if got := a.search(map[string]any{"query": "marmalade", "session_id": "shared"}); len(got) == 0 {
			t.Fatal("a's message is no longer searchable after b deleted its own session of the same id")
		}
	})
}

func TestAdminKeyActsAsAnyTenant(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	ts.as(keyA).store("s1", msg("user", "alpha note about quinces"))
	admin := ts.as(keyAdmin, "a")
	if got := admin.search(map[string]any{"query": "quinces"}); len(got) != 1 {
		t.Fatalf("admin acting as a found %d results, want 1", len(got))
	}
	if got := ts.as(keyAdmin).search(map[string]any{"query": "quinces"}); len(got) != 0 {
		t.Fatalf("admin without a tenant header sees tenant a: %v", got)
	}
	if r := ts.as(keyB, "a").do("GET", "/v1/sessions/s1", nil); r.Status != 403 || r.errCode() != "forbidden" {
		t.Fatalf("tenant b naming tenant a: %d %s, want 403", r.Status, r.Raw)
	}
	if r := ts.as(keyAdmin, "../etc").do("GET", "/v1/sessions", nil); r.Status != 400 {
		t.Fatalf("admin naming a bad tenant: %d %s, want 400", r.Status, r.Raw)
	}
}

func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t, func(c *Config) { c.RateLimit, c.RateBurst = 0.01, 3 })
	a := ts.as(keyA)
	for i := range 3 {
		a.mustDo(200, "GET", "/v1/sessions", nil)
		_ = i
	}
	r := a.do("GET", "/v1/sessions", nil)
	if r.Status != 429 || r.errCode() != "rate_limited" {
		t.Fatalf("4th request in the burst: %d %s, want 429", r.Status, r.Raw)
	}
	// Another key has its own allowance; health checks have none.
	ts.as(keyB).mustDo(200, "GET", "/v1/sessions", nil)
	ts.mustDo(200, "GET", "/healthz", nil)
	// Guessing keys is limited per IP.
	for range 3 {
		ts.as("guess-0123456789abcdef").do("GET", "/v1/sessions", nil)
	}
	if r := ts.as("guess-0123456789abcdef").do("GET", "/v1/sessions", nil); r.Status != 429 {
		t.Fatalf("key guessing is not rate limited: %d", r.Status)
	}
}

func TestRateLimitPerIPWithoutKeys(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir(), func(c *Config) { c.RateLimit, c.RateBurst = 0.01, 2 })
	ts.mustDo(200, "GET", "/v1/sessions", nil)
	ts.mustDo(200, "GET", "/v1/sessions", nil)
	if r := ts.do("GET", "/v1/sessions", nil); r.Status != 429 {
		t.Fatalf("3rd request: %d, want 429", r.Status)
	}
}

func TestKeysFromEnvAndFile(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("file-key-0123456789abcdef"))
	file := filepath.Join(t.TempDir(), "ctxd.yaml")
	os.WriteFile(file, []byte("keys:\n  - {tenant: f, sha256: "+hex.EncodeToString(sum[:])+"}\n  - {tenant: ops, key: ops-key-0123456789abc, admin: true}\n"), 0o600)
	cmd := newServeCmd()
	env := map[string]string{"CTXD_API_KEYS": "e:env-key-0123456789abcdef"}
	if err := server.ApplyLayers(cmd.Flags(), file, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	var cfg Config
	cfg.APIKeys, _ = cmd.Flags().GetString("api-keys")
	if err := cfg.LoadKeys(file); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, t.TempDir(), func(c *Config) { c.Keys = cfg.Keys })
	ts.as("env-key-0123456789abcdef").store("s", msg("user", "from env tenant"))
	ts.as("file-key-0123456789abcdef").mustDo(200, "GET", "/v1/sessions", nil)
	if got := ts.as("ops-key-0123456789abc", "e").search(map[string]any{"query": "env tenant"}); len(got) != 1 {
		t.Fatalf("admin key from the file, acting as e: %d results", len(got))
	}
	if r := ts.as(hex.EncodeToString(sum[:])).do("GET", "/v1/sessions", nil); r.Status != 401 {
		t.Fatalf("the hash itself was accepted as a key: %d", r.Status)
	}

	for _, bad := range []string{"nokey", "a:short", "../x:0123456789abcdef0", "a:sha256:abc"} {
		if _, err := httpapi.ParseKeys(bad); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "0123456789abcdef0") {
			t.Errorf("error repeats the key: %v", err)
		}
	}
}

func TestRemoteListenNeedsKeysOrConsent(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir())
	cfg.Addr = "0.0.0.0:8080"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "API keys") {
		t.Fatalf("open address without keys: %v", err)
	}
	cfg.AllowRemote = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.AllowRemote = false
	cfg.Keys, _ = httpapi.ParseKeys("a:" + keyA)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:8080", "[::1]:9000"} {
		c := testConfig(t.TempDir())
		c.Addr = addr
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
}

func TestRequestTimeoutCancelsWork(t *testing.T) {
	t.Parallel()
	slow := slowEmbeddings(t, 3*time.Second)
	ts := startServer(t, t.TempDir(), func(c *Config) {
		c.EmbedURL, c.EmbedDim, c.RequestTimeout = slow.URL+"/v1", 8, 300*time.Millisecond
	})
	start := time.Now()
	r := ts.do("POST", "/v1/sessions/s/messages", map[string]any{"messages": []any{msg("user", "slow to embed")}})
	if r.Status != 503 || r.errCode() != "unavailable" {
		t.Fatalf("timed-out write: %d %s, want 503", r.Status, r.Raw)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Fatalf("the request ran %v past its timeout: its work was not cancelled", took)
	}
	if r := ts.do("GET", "/v1/sessions/s/messages", nil); r.Status != 404 {
		t.Fatalf("a write answered 503 was stored: %d %s", r.Status, r.Raw)
	}
}

// slowEmbeddings is fakeEmbeddings that takes delay to answer (or until the
// client gives up).
func slowEmbeddings(t *testing.T, delay time.Duration) *httptest.Server {
	var calls atomic.Int64
	fast := fakeEmbeddings(t, &calls)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		fast.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Embedding calls are bounded across requests: 12 concurrent writes never
// have more than --max-embeds calls at the embedding endpoint at once.
func TestEmbeddingCallsAreBounded(t *testing.T) {
	t.Parallel()
	var calls, inFlight, peak atomic.Int64
	fast := fakeEmbeddings(t, &calls)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(50 * time.Millisecond) // long enough for callers to pile up
		fast.Config.Handler.ServeHTTP(w, r)
		inFlight.Add(-1)
	}))
	t.Cleanup(srv.Close)
	ts := startServer(t, t.TempDir(), func(c *Config) { c.EmbedURL, c.EmbedDim, c.MaxEmbeds = srv.URL+"/v1", 8, 2 })
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts.store(fmt.Sprintf("s%d", i), msg("user", fmt.Sprintf("message %d to embed", i)))
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 2 || p < 1 {
		t.Fatalf("%d embedding calls at once, want at most --max-embeds=2", p)
	}
	if calls.Load() < 12 {
		t.Fatalf("%d embedding calls for 12 writes", calls.Load())
	}
}

// Compactions are bounded across sessions: with --max-compactions 1, the
// compaction log shows no two running at once, whatever the session.
func TestCompactionsAreBounded(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir(), func(c *Config) { c.MaxCompactions = 1 })
	var wg sync.WaitGroup
	for s := range 6 {
		session := fmt.Sprintf("c%d", s)
		ts.mustDo(200, "PUT", "/v1/sessions/"+session, map[string]any{"context_window": 1500})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				ts.store(session, msg("user", chatter(s*100+i)))
			}
		}()
	}
	wg.Wait()
	servertest.CheckNoOverlappingCompactions(t, ts.Dir, "")
}

// API answers, refusals included, are neither sniffed nor cached: they
// hold a tenant's content.
func TestAnswersNotSniffedNorCached(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	ts.as(keyA).store("s", msg("user", "the vault is on the blue drive"))
	for _, r := range []struct {
		key, method, path string
	}{{keyA, "GET", "/v1/sessions/s/messages"}, {keyA, "POST", "/v1/search"}, {"", "GET", "/v1/sessions"}, {keyA, "GET", "/v1/sessions/nope"}} {
		req, _ := http.NewRequest(r.method, ts.URL+r.path, strings.NewReader(`{"query": "vault"}`))
		if r.key != "" {
			req.Header.Set("Authorization", "Bearer "+r.key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q, Cache-Control %q", r.method, r.path, res.StatusCode,
				res.Header.Get("X-Content-Type-Options"), res.Header.Get("Cache-Control"))
		}
	}
}
