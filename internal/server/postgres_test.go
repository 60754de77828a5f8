package server_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// node starts a ctxd node on the PostgreSQL store dsn with a data dir of its
// own (its search index, event log and cold mirror).
func node(t *testing.T, dsn string) (*client.Client, *server.Main) {
	t.Helper()
	url, m := servertest.Start(t, t.TempDir(), func(c *server.Config) { c.Store = dsn })
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

func windowHas(w *api.Context, word string) bool {
	for _, m := range w.Messages {
		if strings.Contains(m.Content, word) {
			return true
		}
	}
	return false
}

// Two nodes on one database: what one acknowledges, the other's next window
// and search answer hold, with no wait in between (its index catches up
// from the change feed before it answers; its own loop would take up to
// two seconds). A third node joining with an empty data dir builds its
// index from the database alone.
func TestTwoNodesReadYourWrites(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a, _ := node(t, dsn)
	b, _ := node(t, dsn)
	for i, w := range []struct {
		on   *client.Client
		word string
	}{{a, "okapi"}, {b, "narwhal"}, {a, "quokka"}} {
		in := []api.MessageIn{{Role: "user", Content: "the " + w.word + " grazes by the river"}}
		if _, err := w.on.Append(ctx, "shared", in); err != nil {
			t.Fatal(err)
		}
		other := b
		if w.on == b {
			other = a
		}
		win, err := other.Context(ctx, "shared", api.ContextIn{Prompt: "which animal?"})
		if err != nil {
			t.Fatal(err)
		}
		if len(win.Messages) != i+1 || !windowHas(win, w.word) {
			t.Fatalf("write %d (%s): the other node's window holds %d messages, without it", i, w.word, len(win.Messages))
		}
		hits, err := other.Search(ctx, api.SearchIn{Query: w.word, Mode: "text"})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 1 || !strings.Contains(hits[0].Content, w.word) {
			t.Fatalf("write %d: the other node's search for %q found %d hits", i, w.word, len(hits))
		}
	}
	c, _ := node(t, dsn)
	for _, word := range []string{"okapi", "narwhal", "quokka"} {
		hits, err := c.Search(ctx, api.SearchIn{Query: word, Mode: "text"})
		if err != nil || len(hits) != 1 {
			t.Fatalf("a new node's search for %q: %d hits, %v", word, len(hits), err)
		}
	}
	st, err := c.Session(ctx, "shared")
	if err != nil || st.Messages.Active != 3 {
		t.Fatalf("the new node's session status: %+v, %v", st, err)
	}
}

// Compactions on node A race appends on node B to one session (and B's
// own compactions, which its appends trigger): every message B
// acknowledged is stored, in some state, and the session's counters are
// its messages' (each write holds the session's row lock).
func TestCompactionOnARacesAppendsOnB(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a, am := node(t, dsn)
	b, _ := node(t, dsn)
	window := 2000
	if _, err := a.PutSession(ctx, "race", &api.SessionIn{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	var acked []string
	appended := make(chan error, 1)
	step := make(chan struct{}, 40) // one per acknowledged append: A compacts after each
	go func() {
		for i := range 40 {
			text := fmt.Sprintf("turn %d: the deploy of service %d failed on host %d with error code %d, retried twice", i, i*7, i*13, i*101)
			out, err := b.Append(ctx, "race", []api.MessageIn{{Role: []string{"user", "assistant"}[i%2], Content: strings.Repeat(text+" ", 4)}})
			if err != nil {
				appended <- err
				return
			}
			acked = append(acked, out.IDs...)
			step <- struct{}{}
		}
		appended <- nil
	}()
	moved, compactions := 0, 0
	for done := false; !done; {
		select {
		case err := <-appended:
			if err != nil {
				t.Fatalf("append on B: %v", err)
			}
			done = true
		case <-step:
		}
		rep, err := a.Compact(ctx, "race", api.CompactIn{Prompt: "which deploy failed?"})
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status < 500 {
			continue // nothing to compact yet
		}
		if err != nil {
			t.Fatalf("compaction on A: %v", err)
		}
		compactions++
		moved += len(rep.Dropped) + len(rep.Summarized)
	}
	st := am.Store
	got, err := st.MessagesByID(ctx, memory.DefaultTenant, acked, false)
	if err != nil || len(got) != len(acked) {
		t.Fatalf("%d of the %d messages B acknowledged are stored (%v)", len(got), len(acked), err)
	}
	sess, err := st.Session(ctx, memory.DefaultTenant, "race")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := st.Messages(ctx, memory.DefaultTenant, "race", memory.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := memory.Imported(sess, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Counts != want.Counts || sess.Tokens != want.Tokens || sess.Summaries != want.Summaries {
		t.Fatalf("session counters %v, %d tokens, %d summaries; its messages say %v, %d, %d", sess.Counts, sess.Tokens, sess.Summaries, want.Counts, want.Tokens, want.Summaries)
	}
	if sess.Counts.Summarized+sess.Counts.Dropped == 0 {
		t.Fatalf("nothing was compacted (A's compactions moved %d): the race was not run", moved)
	}
	if moved == 0 {
		t.Fatalf("A's %d compactions moved nothing: the race was not run", compactions)
	}
	t.Logf("A's %d compactions moved %d messages; the session: %v, %d summaries", compactions, moved, sess.Counts, sess.Summaries)
}

// A --store that is neither empty nor a PostgreSQL URL is refused, and an
// unreachable database fails the start naming it without its password.
func TestStoreSettingRefused(t *testing.T) {
	ctx := context.Background()
	for store, want := range map[string]string{
		"mysql://db/ctxd": "--store",
		"postgres://ctxd:s3cret@127.0.0.1:1/ctxd?sslmode=disable&connect_timeout=5": "connect to postgres://ctxd@127.0.0.1:1/ctxd",
	} {
		cfg := servertest.Config(t.TempDir())
		cfg.Store = store
		m, err := servertest.Run(ctx, cfg)
		if err == nil {
			m.Close()
			t.Fatalf("--store %s: the server started", store)
		}
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("--store %s: %v, want it to name %q and not the password", store, err, want)
		}
	}
}

// The event log is in the database: A's compactions are in B's events,
// and neither node writes event files or a cold mirror into its data dir
// (the cold originals are rows of the database). Kept in files, B's
// events showed only what B itself did.
func TestTwoNodesShareTheEventLog(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a, am := node(t, dsn)
	b, _ := node(t, dsn)
	window := 2000
	if _, err := a.PutSession(ctx, "ev", &api.SessionIn{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		text := fmt.Sprintf("turn %d: the deploy of service %d failed on host %d with error code %d, retried twice", i, i*7, i*13, i*101)
		if _, err := a.Append(ctx, "ev", []api.MessageIn{{Role: []string{"user", "assistant"}[i%2], Content: strings.Repeat(text+" ", 4)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Compact(ctx, "ev", api.CompactIn{Prompt: "which deploy failed?"}); err != nil {
		t.Fatal(err)
	}
	onA, err := a.Events(ctx, "compaction", client.EventQuery{SessionID: "ev"})
	if err != nil || len(onA) == 0 {
		t.Fatalf("A's compaction events: %v, %v", onA, err)
	}
	onB, err := b.Events(ctx, "compaction", client.EventQuery{SessionID: "ev"})
	if err != nil || !equalJSON(onA, onB) {
		t.Fatalf("B's compaction events of the session A compacted: %v, %v; A's: %v", onB, err, onA)
	}
	for _, dir := range []string{server.LogsPath(am.Config.DataDir), server.ColdPath(am.Config.DataDir)} {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is on the node's disk (%v): on PostgreSQL it belongs in the database", dir, err)
		}
	}
}
