package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// plantedFact is a line of a tool output and the question an agent asks
// about it much later, in other words.
type plantedFact struct{ line, question string }

var plantedFacts = []plantedFact{
	{"config/limits.yaml:12:  max_connections: 240", "what is max_connections set to in the limits config?"},
	{"ERROR 1213 (40001): Deadlock found when trying to get lock; try restarting transaction", "which error code did the deadlock have?"},
	{"INFO  server listening on 0.0.0.0:8437 (pid 30121)", "which port is the server listening on?"},
	{"9f3e2a1 Fix off-by-one in paginate_results when the last page is full", "which commit fixed paginate_results?"},
	{"Python 3.11.4 (main, Jun  7 2023, 12:45:48) [GCC 11.3.0] on linux", "which python version is installed?"},
	{"FAILED tests/test_billing.py::test_invoice_rounding - AssertionError: expected 10.05, got 10.04", "what did test_invoice_rounding expect?"},
	{".env:3:OAUTH_CLIENT_ID=ctxd-web-7781", "what is the oauth client id?"},
	{"/dev/sdb1        916G  861G   55G  94% /var/lib/postgresql", "how full is the postgresql disk?"},
	{"[config] celery worker concurrency: 12 (prefork)", "how many celery workers run concurrently?"},
	{"settings/base.py:88:TIME_ZONE = 'Europe/Lisbon'", "which time zone does the app use?"},
	{"shop/pricing.py:41:def compute_discount(order, tier='gold', cap=None):", "what is the default tier of compute_discount?"},
	{"  Applying orders.0042_add_refund_reason... OK", "which migration added the refund reason?"},
	{"cache stats: hits=87310 misses=12690 hit_ratio=0.873", "what was the cache hit ratio?"},
	{"node_modules/left-pad/package.json:3:  \"version\": \"1.3.0\",", "which version of left-pad is installed?"},
	{"KeyError: 'shipping_zone'", "which key was missing in the KeyError?"},
	{"17 3 * * * /usr/local/bin/backup.sh --full >> /var/log/backup.log 2>&1", "when does the backup job run?"},
	{"CODEOWNERS:9:/payments/  @team-payments", "who owns the payments code?"},
	{"deploy/k8s/api.yaml:31:            memory: 1536Mi", "what memory limit does the api deployment have?"},
	{"flags.json:14:  \"new_checkout_flow\": false,", "is the new checkout flow flag turned on?"},
	{"notAfter=Mar 14 09:12:44 2027 GMT", "when does the ssl certificate expire?"},
}

// agentSession writes a coding agent's session of turns tool calls: shell
// commands and their outputs (listings, test runs, greps, logs), with the
// facts planted one each in outputs of the first two thirds. Deterministic.
func agentSession(t *testing.T, h *memorytest.Harness, session string, turns int) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(25, 300))
	words := strings.Fields("config server request handler order invoice payment user account session cache worker queue " +
		"test build deploy version module package import error warning timeout retry limit port path file line " +
		"value default setting option flag migration model view template client token database table index key")
	files := []string{"shop/models.py", "shop/views.py", "billing/invoice.py", "api/handlers.go", "settings/base.py",
		"tests/test_orders.py", "deploy/k8s/worker.yaml", "config/app.yaml", "README.md", "payments/gateway.py"}
	filler := func(kind int) string {
		var b strings.Builder
		n := 8 + r.IntN(30)
		for i := range n {
			f := files[r.IntN(len(files))]
			switch kind {
			case 0: // grep
				fmt.Fprintf(&b, "%s:%d:    %s = %s(%s, %s)\n", f, 10+r.IntN(400), words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))])
			case 1: // tests
				fmt.Fprintf(&b, "tests/test_%s.py::test_%s_%s PASSED [%3d%%]\n", words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))], i*100/n)
			case 2: // log
				fmt.Fprintf(&b, "2026-11-%02d 10:%02d:%02d INFO %s %s %s in %dms\n", 1+r.IntN(27), r.IntN(60), r.IntN(60), words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))], r.IntN(900))
			default: // listing
				fmt.Fprintf(&b, "-rw-r--r-- 1 dev dev %6d Nov %2d %s\n", r.IntN(90000), 1+r.IntN(27), f)
			}
		}
		return b.String()
	}
	plantAt := map[int]int{}
	for i := range plantedFacts {
		plantAt[5+i*(turns*2/3)/len(plantedFacts)] = i
	}
	msgs := []*memory.Message{{Role: memory.RoleUser, Content: "Fix the failing checkout tests and keep the api fast."}}
	for turn := range turns {
		kind := r.IntN(4)
		out := filler(kind)
		if f, ok := plantAt[turn]; ok {
			lines := strings.SplitAfter(out, "\n")
			at := r.IntN(len(lines))
			out = strings.Join(lines[:at], "") + plantedFacts[f].line + "\n" + strings.Join(lines[at:], "")
		}
		cmd := []string{"grep -rn " + words[r.IntN(len(words))] + " .", "pytest -q", "tail -n 40 logs/app.log", "ls -l " + files[r.IntN(len(files))]}[kind]
		if _, planted := plantAt[turn]; !planted && r.IntN(4) == 0 {
			// Many commands print nothing (an edit, git add, mkdir).
			cmd, out = "sed -i 's/"+words[r.IntN(len(words))]+"/x/' "+files[r.IntN(len(files))], ""
		}
		msgs = append(msgs, toolTurn(turn, cmd, out)...)
		if len(msgs) >= 40 {
			if _, err := h.Append(ctx, session, msgs); err != nil {
				t.Fatal(err)
			}
			msgs = nil
		}
	}
	if len(msgs) > 0 {
		if _, err := h.Append(ctx, session, msgs); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// In a 300-turn agent session with 20 facts planted in tool outputs, hybrid
// search with the later question finds the output in the top 10 about as
// often as text search does: it found 7 of 20 where text found 17.
func TestSearchAgentSessionPlantedFacts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := memorytest.Open(t)
	window := 5_000_000 // the whole session stays in the window: this is about search
	if _, err := h.PutSession(ctx, "agent", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	agentSession(t, h, "agent", 300)
	found := map[string]int{}
	for _, mode := range []string{memory.ModeText, memory.ModeHybrid} {
		for _, f := range plantedFacts {
			res, err := h.Search(ctx, memory.SearchRequest{Query: f.question, Sessions: []string{"agent"}, K: 10, Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			hit := false
			for _, x := range res {
				hit = hit || strings.Contains(x.Content, f.line)
			}
			if hit {
				found[mode]++
			} else {
				t.Logf("%s: %q not in the top 10", mode, f.question)
			}
		}
	}
	t.Logf("found in the top 10 of 20: text %d, hybrid %d", found[memory.ModeText], found[memory.ModeHybrid])
	if found[memory.ModeText] < 14 {
		t.Errorf("text search found %d of 20: the fixture's questions should be findable by their words", found[memory.ModeText])
	}
	if found[memory.ModeHybrid] < found[memory.ModeText]-1 {
		t.Errorf("hybrid found %d of 20, text %d", found[memory.ModeHybrid], found[memory.ModeText])
	}
}
