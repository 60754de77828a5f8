package client_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/admin"
)

func user(content string) api.MessageIn { return api.MessageIn{Role: "user", Content: content} }

func TestSessions(t *testing.T) {
	c := newClient(t, startServer(t))
	ctx := t.Context()
	window := 4000
	st, err := c.PutSession(ctx, "s1", &api.SessionIn{ContextWindow: &window, Metadata: map[string]any{"team": "ops"}})
	if err != nil || st.ID != "s1" || st.ContextWindow != 4000 || st.Metadata["team"] != "ops" {
		t.Fatalf("PutSession = %+v, %v", st, err)
	}
	for _, id := range []string{"s2", "s3"} {
		if _, err := c.PutSession(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := c.Session(ctx, "s1"); err != nil || got.ContextWindow != 4000 || got.State != "ok" {
		t.Fatalf("Session = %+v, %v", got, err)
	}
	page, err := c.ListSessions(ctx, client.Page{Limit: 2})
	if err != nil || len(page.Sessions) != 2 || page.NextCursor == "" {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	var ids []string
	for s, err := range c.Sessions(ctx, 1) { // a page per session
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	if !slices.Equal(ids, []string{"s1", "s2", "s3"}) {
		t.Fatalf("Sessions = %v", ids)
	}
	if err := c.DeleteSession(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Session(ctx, "s2")
	wantCode(t, err, http.StatusNotFound, memory.ENOTFOUND)
	wantCode(t, c.DeleteSession(ctx, "s2"), http.StatusNotFound, memory.ENOTFOUND)
}

func TestMessages(t *testing.T) {
	c := newClient(t, startServer(t))
	ctx := t.Context()
	in := []api.MessageIn{
		{Role: "system", Content: "You are a deployment assistant.", Pinned: true},
		{Role: "user", Content: "deploy the api to staging", Metadata: map[string]any{"n": int64(1234567890123)}, MessageID: "c-1"},
		{Role: "assistant", Content: "Deploying the api to staging now."},
	}
	out, err := c.Append(ctx, "m", in)
	if err != nil || len(out.IDs) != 3 || len(out.Tokens) != 3 || out.Session.ID != "m" || out.Compaction != nil {
		t.Fatalf("Append = %+v, %v", out, err)
	}
	got, err := c.Message(ctx, out.IDs[1])
	if err != nil || got.Content != in[1].Content || got.MessageID != "c-1" || got.State != memory.StateActive {
		t.Fatalf("Message = %+v, %v", got, err)
	}
	if n, ok := got.Metadata["n"].(json.Number); !ok || n.String() != "1234567890123" {
		t.Fatalf("metadata n = %#v, want the exact json.Number", got.Metadata["n"])
	}
	var listed []string
	for m, err := range c.Messages(ctx, "m", nil, 2) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, m.ID)
	}
	if !slices.Equal(listed, out.IDs) {
		t.Fatalf("Messages = %v, want %v", listed, out.IDs)
	}

	content, pinned := "deploy the api to production", true
	patched, err := c.PatchMessage(ctx, out.IDs[1], api.MessagePatch{Content: &content, Pinned: &pinned, Metadata: new(map[string]any)})
	if err != nil || !patched.Pinned || len(patched.Metadata) != 0 || patched.Content != content {
		t.Fatalf("PatchMessage = %+v, %v", patched, err)
	}
	l, err := c.ListMessages(ctx, "m", client.MessageQuery{States: []string{"all"}})
	if err != nil || !slices.ContainsFunc(l.Messages, func(m api.Message) bool { return m.Content == content }) {
		t.Fatalf("ListMessages after the edit = %+v, %v", l, err)
	}
	if err := c.DeleteMessage(ctx, out.IDs[2], false); err != nil {
		t.Fatal(err)
	}
	_, err = c.Message(ctx, out.IDs[2])
	wantCode(t, err, http.StatusNotFound, memory.ENOTFOUND)
}

func TestSearchAndContext(t *testing.T) {
	c := newClient(t, startServer(t))
	ctx := t.Context()
	_, err := c.Append(ctx, "ops", []api.MessageIn{
		{Role: "system", Content: "You are a deployment assistant.", Pinned: true},
		user("The staging DB password rotates every Friday."),
		{Role: "assistant", Content: "Noted: the password rotates on Fridays."},
		user("Our lunch place is the noodle bar on the corner."),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Search(ctx, api.SearchIn{Query: "when does the password rotate", SessionID: "ops", K: 2, Mode: "text"})
	if err != nil || len(res) == 0 || !strings.Contains(res[0].Content, "password") || res[0].Score <= 0 {
		t.Fatalf("Search = %+v, %v", res, err)
	}
	budget := 500
	win, err := c.Context(ctx, "ops", api.ContextIn{Prompt: "rotate the password?", MaxTokens: &budget, Explain: true})
	if err != nil || win.Budget.MaxTokens != 500 || len(win.Messages) == 0 || win.Messages[0].Source != "pinned" ||
		win.Budget.Levels["pinned"] != win.Messages[0].Tokens {
		t.Fatalf("Context = %+v, %v", win, err)
	}
	chat, err := c.ContextChat(ctx, "ops", api.ContextIn{Prompt: "rotate the password?"})
	if err != nil || len(chat.Messages) != len(win.Messages) || chat.Messages[0].Role != memory.RoleSystem {
		t.Fatalf("ContextChat = %+v, %v", chat, err)
	}
	zero := 0
	_, err = c.Context(ctx, "ops", api.ContextIn{Prompt: "x", MaxTokens: &zero})
	wantCode(t, err, http.StatusBadRequest, memory.EINVALID)
}

// fill stores turns in a 4,000-token session until it is past its
// compaction target, short of its trigger, as the CLI's tests do.
func fill(t *testing.T, c *client.Client, session string) {
	t.Helper()
	ctx := t.Context()
	window, cutoff := 4000, 0.06
	if _, err := c.PutSession(ctx, session, &api.SessionIn{ContextWindow: &window,
		PolicyOverrides: memory.PolicyOverrides{RelevanceCutoff: &cutoff}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		out, err := c.Append(ctx, session, []api.MessageIn{{Role: []string{"user", "assistant"}[i%2],
			Content: fmt.Sprintf("turn %d: the train ran late, so we walked along the river and talked about film %d and the weather", i, i*7)}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Compaction != nil {
			t.Fatalf("a compaction ran on its own at message %d", i)
		}
		if out.Session.Tokens > 1700 {
			return
		}
	}
}

func TestCompactColdRecoverEvents(t *testing.T) {
	c := newClient(t, startServer(t))
	ctx := t.Context()
	fill(t, c, "work")
	dry, err := c.Compact(ctx, "work", api.CompactIn{DryRun: true})
	if err != nil || !dry.DryRun || len(dry.Scores) == 0 {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	rep, err := c.Compact(ctx, "work", api.CompactIn{Prompt: "the weather"})
	if err != nil || rep.Trigger != "manual" || rep.TokensAfter >= rep.TokensBefore || len(rep.Dropped)+len(rep.Summarized) == 0 {
		t.Fatalf("Compact = %+v, %v", rep, err)
	}
	var cold []api.ColdChunk
	for ch, err := range c.Cold(ctx, "work", 2, "") {
		if err != nil {
			t.Fatal(err)
		}
		cold = append(cold, ch)
	}
	if len(cold) != len(rep.Dropped)+len(rep.Summarized) || cold[0].DropReason == "" || cold[0].RecoverableUntil.IsZero() {
		t.Fatalf("Cold = %d chunks (%+v), report dropped %d summarized %d", len(cold), cold[0], len(rep.Dropped), len(rep.Summarized))
	}
	// Newest first by default, every chunk once across pages; "oldest"
	// is the same list reversed; an unknown order is a 400.
	var oldest []api.ColdChunk
	for ch, err := range c.Cold(ctx, "work", 2, "oldest") {
		if err != nil {
			t.Fatal(err)
		}
		oldest = append(oldest, ch)
	}
	for i := range cold {
		if i > 0 && cold[i].ID >= cold[i-1].ID { // ids are ULIDs: they sort by time
			t.Fatalf("Cold: %s after %s, want newest first", cold[i].ID, cold[i-1].ID)
		}
		if len(oldest) != len(cold) || oldest[len(oldest)-1-i].ID != cold[i].ID {
			t.Fatalf("Cold oldest first is not newest first reversed: %d and %d chunks", len(oldest), len(cold))
		}
	}
	if _, err := c.ListCold(ctx, "work", client.Page{Order: "sideways"}); memory.ErrorCode(err) != memory.EINVALID {
		t.Fatalf("order sideways: %v, want %s", err, memory.EINVALID)
	}
	back, err := c.Recover(ctx, "work", cold[0].ID)
	if err != nil || back.ID != cold[0].ID || back.State != memory.StateRecovered {
		t.Fatalf("Recover = %+v, %v", back, err)
	}
	if _, err := c.Recover(ctx, "work", cold[0].ID); err != nil {
		t.Fatalf("recovering twice: %v", err)
	}
	for stream, want := range map[string]string{"compaction": "manual", "recoveries": cold[0].ID} {
		evs, err := c.Events(ctx, stream, client.EventQuery{SessionID: "work", N: 5})
		if err != nil || len(evs) == 0 || !strings.Contains(fmt.Sprint(evs), want) {
			t.Fatalf("Events(%s) = %v, %v; want one naming %s", stream, evs, err, want)
		}
	}
	evs, err := c.Events(ctx, "drops", client.EventQuery{SessionID: "elsewhere"})
	if err != nil || evs == nil || len(evs) != 0 {
		t.Fatalf("Events of no session = %#v, %v; want empty", evs, err)
	}
	_, err = c.Events(ctx, "secrets", client.EventQuery{})
	wantCode(t, err, http.StatusBadRequest, memory.EINVALID)
}

func TestExport(t *testing.T) {
	c := newClient(t, startServer(t))
	ctx := t.Context()
	if _, err := c.Append(ctx, "e", []api.MessageIn{user("quinces are in season")}); err != nil {
		t.Fatal(err)
	}
	body, err := c.Export(ctx, admin.ExportOptions{Session: "e"})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	var lines []string
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) < 3 || !strings.Contains(strings.Join(lines, "\n"), "quinces") ||
		!strings.Contains(lines[len(lines)-1], `"complete":true`) {
		t.Fatalf("export = %q", lines)
	}
	_, err = c.Export(ctx, admin.ExportOptions{})
	wantCode(t, err, http.StatusBadRequest, memory.EINVALID)
	_, err = c.Export(ctx, admin.ExportOptions{Session: "none"})
	wantCode(t, err, http.StatusNotFound, memory.ENOTFOUND)
}

func TestHealthReady(t *testing.T) {
	c := newClient(t, startServer(t))
	if err := c.Health(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Ready(t.Context()); err != nil || r.Status != "ready" {
		t.Fatalf("Ready = %+v, %v", r, err)
	}
}

func TestErrors(t *testing.T) {
	url := startServer(t)
	c := newClient(t, url)
	ctx := t.Context()
	_, err := c.PutSession(ctx, ".hidden", nil)
	wantCode(t, err, http.StatusBadRequest, memory.EINVALID)
	var me *memory.Error
	if !errors.As(err, &me) || !strings.Contains(me.Message, "session") {
		t.Fatalf("the server's message is lost: %v", err)
	}
	if !strings.Contains(err.Error(), "(invalid_request, HTTP 400)") {
		t.Fatalf("Error() = %q", err.Error())
	}
	_, err = c.Append(ctx, "x", []api.MessageIn{{Role: "wizard", Content: "hi"}})
	wantCode(t, err, http.StatusBadRequest, memory.EINVALID)
	_, err = c.Search(ctx, api.SearchIn{Query: "x", Mode: "fuzzy"})
	wantCode(t, err, http.StatusBadRequest, memory.EINVALID)
	_, err = c.Recover(ctx, "x", "01NOSUCHMESSAGE")
	wantCode(t, err, http.StatusNotFound, memory.ENOTFOUND)

	// No server: a transport error naming the URL, not retried forever.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()
	_, err = newClient(t, gone, client.WithRetries(1, 0)).Session(ctx, "s")
	var te *client.TransportError
	if !errors.As(err, &te) || te.URL != gone+"/v1/sessions/s" || !strings.Contains(err.Error(), gone) {
		t.Fatalf("err = %v (%T), want a TransportError naming %s", err, err, gone)
	}
	if memory.ErrorCode(err) != memory.EINTERNAL {
		t.Fatalf("a transport error has code %q", memory.ErrorCode(err))
	}
	for _, bad := range []string{"localhost:8080", "ftp://h", "http://h/?q=1"} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q) did not fail", bad)
		}
	}
}

// Keys choose the tenant: one tenant's sessions do not exist for another,
// an admin key may act as any, and a missing key is EUNAUTHORIZED.
func TestTenantKeys(t *testing.T) {
	const keyA, keyB, keyAdmin = "key-a-0123456789abcdef", "key-b-0123456789abcdef", "key-admin-0123456789abcd"
	keys, err := httpapi.ParseKeys("a:" + keyA + ",b:" + keyB + ",*:" + keyAdmin)
	if err != nil {
		t.Fatal(err)
	}
	url := startServer(t, func(c *server.Config) { c.Keys = keys })
	ctx := t.Context()
	a := newClient(t, url, client.WithAPIKey(keyA))
	b := newClient(t, url, client.WithAPIKey(keyB))
	if _, err := a.Append(ctx, "shared", []api.MessageIn{user("the marmalade recipe is secret")}); err != nil {
		t.Fatal(err)
	}
	_, err = b.Session(ctx, "shared")
	wantCode(t, err, http.StatusNotFound, memory.ENOTFOUND)
	if res, err := b.Search(ctx, api.SearchIn{Query: "marmalade"}); err != nil || len(res) != 0 {
		t.Fatalf("b's search = %+v, %v", res, err)
	}
	if st, err := newClient(t, url, client.WithAPIKey(keyAdmin), client.WithTenant("a")).Session(ctx, "shared"); err != nil || st.ID != "shared" {
		t.Fatalf("admin as a = %+v, %v", st, err)
	}
	_, err = newClient(t, url, client.WithAPIKey(keyB), client.WithTenant("a")).Session(ctx, "shared")
	wantCode(t, err, http.StatusForbidden, memory.EFORBIDDEN)
	_, err = newClient(t, url).ListSessions(ctx, client.Page{})
	wantCode(t, err, http.StatusUnauthorized, memory.EUNAUTHORIZED)
}
