package ui_test

import (
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// The prompt cache figures the gateway measured show beside the window
// gauges: per session in the listing and the session's head, and over all
// the caller's sessions above the listing (another tenant's not counted).
func TestPromptCacheShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := memory.NewGateway(e.h.Service)
	for _, u := range []struct {
		tenant, session string
		usage           memory.PromptUsage
	}{
		// Session s: 1,536 of 4,000 read, 2,000 written: hit 38.4%,
		// saved (1,536 x 0.9 - 2,000 x 0.25) / 4,000 = 22.1%.
		{"a", "s", memory.PromptUsage{Input: 2000, CacheWrite: 2000}},
		{"a", "s", memory.PromptUsage{Input: 2000, CacheRead: 1536}},
		// Tenant b's: not in tenant a's total.
		{"b", "theirs", memory.PromptUsage{Input: 90000, CacheRead: 90000}},
	} {
		if err := g.RecordUsage(tenant(u.tenant), u.session, u.usage); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.h.Append(tenant("a"), "plain", userMsgs("no gateway call here")); err != nil {
		t.Fatal(err)
	}
	list := e.do(t, "GET", "/ui/", keyA, nil)
	for _, want := range []string{
		"Prompt cache, all sessions: <b>38.4%</b> of 4,000 input tokens read from the provider's cache, <b>22.1%</b> of the input cost saved, over 2 gateway calls.",
		`<td class="r">38.4% <span class="muted">· 22.1%</span></td>`,
		`<td class="r"><span class="muted">-</span></td>`, // the session without gateway calls
	} {
		if !strings.Contains(list.body, want) {
			t.Errorf("sessions page lacks %q: %.3000s", want, list.body)
		}
	}
	head := e.do(t, "GET", "/ui/sessions/s", keyA, nil)
	if want := "prompt cache <b>38.4%</b> hit · <b>22.1%</b> of input cost saved"; !strings.Contains(head.body, want) {
		t.Errorf("session page lacks %q: %.3000s", want, head.body)
	}
	if plain := e.do(t, "GET", "/ui/sessions/plain", keyA, nil); strings.Contains(plain.body, "prompt cache") {
		t.Errorf("a session without gateway calls shows prompt cache figures")
	}
}
