package server_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/internal/server/servertest"
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
