package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// chromium is Debian's package, which .ci/run installs.
const chromium = "/usr/bin/chromium"

// TestBrowser drives the dashboard in headless Chromium as a person would:
// log in, open the sessions page, open a session, type a prompt and see
// the window, recover a cold message with its button, then check through
// the API that its state changed. Screenshots go to $CTXD_ARTIFACTS (a
// temp dir the test names otherwise); with CTXD_UI_SCREENSHOT set, the
// session page is also saved there (the README's docs/ui-session.png).
func TestBrowser(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath(chromium); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: .ci/run installs Debian's chromium for this test", chromium)
		}
		t.Skipf("%s is not installed (apt-get install -y chromium); CI runs this test", chromium)
	}
	artifacts := os.Getenv("CTXD_ARTIFACTS")
	if artifacts == "" {
		var err error
		if artifacts, err = os.MkdirTemp("", "ctxd-ui-e2e-"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", artifacts)

	h := memorytest.Open(t, memorytest.WithEvents(t))
	a := tenant("a")
	seedDemo(t, h, a)
	keys, err := httpapi.ParseKeys("a:" + keyA + ",b:" + keyB)
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.New(h.Service, httpapi.Options{Keys: keys, Logger: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	base := "http://" + ln.Addr().String()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()

	saveShot := func(path string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			buf, err := chromedp.CaptureScreenshot()(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(path, buf, 0o644)
		})
	}
	shot := func(name string) chromedp.Action[chromedp.Void] { return saveShot(filepath.Join(artifacts, name)) }
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			_ = chromedp.Do(ctx, shot("failed-"+strings.ReplaceAll(name, " ", "-")+".png"))
			t.Fatalf("%s: %v", name, err)
		}
	}
	value := func(name string, a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(ctx, a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	step("log in",
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(css(`input[name="key"]`)),
		chromedp.SendKeys(css(`input[name="key"]`), keyA),
		chromedp.Submit(css(`input[name="key"]`)),
		chromedp.WaitVisible(css(`table.sessions`)),
		shot("1-sessions.png"),
	)
	// The prompt cache the gateway measured (seedDemo's two calls), over
	// all sessions and beside the session's gauge.
	if sum := value("cache total", chromedp.Text(css(`.cachesum`))); !strings.Contains(sum, "80.0% of 10,000 input tokens read") {
		t.Fatalf("sessions page prompt cache line %q", sum)
	}
	step("open the session",
		chromedp.Click(css(`a[href="/ui/sessions/`+demoSession+`"]`)),
		chromedp.WaitVisible(css(`svg.chart`)),
	)
	if url := value("location", chromedp.Location()); url != base+"/ui/sessions/"+demoSession {
		t.Fatalf("session page at %s", url)
	}
	if c := value("session cache", chromedp.Text(css(`.headgauge .cache`))); !strings.Contains(c, "80.0% hit") {
		t.Fatalf("session head prompt cache %q", c)
	}
	step("build the window for a prompt",
		chromedp.SendKeys(css(`textarea[name="prompt"]`), "what is the zebrafish password manager vault on?"),
		chromedp.Click(css(`#window button[type="submit"]`)),
		chromedp.WaitVisible(css(`#window-result table.window`)),
	)
	if budget := value("budget", chromedp.Text(css(`#window-result .budget`))); !strings.Contains(budget, "would recover") {
		t.Fatalf("window budget line %q does not say what it would recover", budget)
	}
	step("see the window", chromedp.ScrollIntoView(css(`#window`)), shot("2-window.png"))
	if name := os.Getenv("CTXD_UI_SCREENSHOT"); name != "" {
		step("screenshot for the README",
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := chromedp.Evaluate[any](`window.scrollTo(0, 0)`)(ctx, tg)
				return err
			}),
			saveShot(name),
		)
	}
	step("open cold storage",
		chromedp.Click(css(`a[href="/ui/sessions/`+demoSession+`/cold"]`)),
		chromedp.WaitVisible(css(`button.recover`)),
	)
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(css(`tr.row[data-state="summarized"], tr.row[data-state="dropped"]`), "id"))
	if err != nil || !strings.HasPrefix(attr.Value, "m-") {
		t.Fatalf("no cold row: %q %v", attr.Value, err)
	}
	rowID := attr.Value
	id := strings.TrimPrefix(rowID, "m-")
	step("recover it by its button",
		chromedp.Click(css(`#`+rowID+` button.recover`)),
		chromedp.WaitVisible(css(`tr#`+rowID+`[data-state="recovered"]`)),
		shot("3-recovered.png"),
	)
	// The state changed in the store, as the API reports it.
	req, _ := http.NewRequest("GET", base+"/v1/messages/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+keyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		State string `json:"state"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 || m.State != "recovered" {
		t.Fatalf("GET /v1/messages/%s: %d, state %q (%v)", id, resp.StatusCode, m.State, err)
	}
}

// demoSession is the session the browser opens (and the README shows).
const demoSession = "agent-main"

// seedDemo writes what the dashboard is for: a session that compacted
// several times, with a pinned note, and a few others.
func seedDemo(t *testing.T, h *memorytest.Harness, ctx context.Context) {
	t.Helper()
	h.Compacted(t, ctx, demoSession)
	topics := []string{"the build cache", "flaky integration tests", "the release checklist", "database migrations",
		"the rate limiter", "log rotation", "the on-call rota", "TLS certificates"}
	for i := range 120 {
		role := memory.RoleUser
		text := fmt.Sprintf("what should we do about %s before Friday? (%d)", topics[i%len(topics)], i)
		if i%2 == 1 {
			role = memory.RoleAssistant
			text = fmt.Sprintf("For %s: check the dashboards, write down the decision, and ping the owner. Step %d.", topics[i%len(topics)], i)
		}
		h.Clock.Add(time.Minute)
		if _, err := h.Append(ctx, demoSession, []*memory.Message{{Role: role, Content: text}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Append(ctx, demoSession, []*memory.Message{{Role: memory.RoleSystem, Pinned: true,
		Content: "Project rules: all deploys go through the blue pipeline; never force-push main."}}); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"agent-build-7", "agent-docs-2", "agent-triage-11", "research-notes"} {
		window := 4000 * (i + 1)
		if _, err := h.PutSession(ctx, id, memory.SessionUpdate{ContextWindow: &window}); err != nil {
			t.Fatal(err)
		}
		for j := range 8 * (i + 1) {
			if _, err := h.Append(ctx, id, userMsgs(fmt.Sprintf("%s: step %d of the plan, with notes on %s", id, j, topics[j%len(topics)]))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Two gateway calls as a provider reports them: the second reads
	// 8,000 of its 9,000 tokens from the cache.
	g := memory.NewGateway(h.Service)
	for _, u := range []memory.PromptUsage{{Input: 1000}, {Input: 9000, CacheRead: 8000}} {
		if err := g.RecordUsage(ctx, demoSession, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

func userMsgs(text string) []*memory.Message {
	return []*memory.Message{{Role: memory.RoleUser, Content: text}}
}
