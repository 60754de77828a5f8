package mcpserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/mcpserver"
	"github.com/ctxd/ctxd/memory"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestListTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inProcess)
	res, err := f.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{mcpserver.ToolSearch: true, mcpserver.ToolSave: false, mcpserver.ToolContext: false,
		mcpserver.ToolRecover: false, mcpserver.ToolGet: true, mcpserver.ToolStatus: true}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		readOnly, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		if len(tool.Description) < 100 {
			t.Errorf("%s: description %q says too little to act on", tool.Name, tool.Description)
		}
		if tool.Annotations == nil || tool.Annotations.ReadOnlyHint != readOnly {
			t.Errorf("%s: annotations %+v, want read-only %v", tool.Name, tool.Annotations, readOnly)
		}
		in, _ := tool.InputSchema.(map[string]any)
		props, _ := in["properties"].(map[string]any)
		if in["type"] != "object" || len(props) == 0 {
			t.Errorf("%s: input schema %v", tool.Name, tool.InputSchema)
		}
		for name, p := range props {
			if p.(map[string]any)["description"] == nil {
				t.Errorf("%s: argument %s has no description", tool.Name, name)
			}
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s: no output schema", tool.Name)
		}
	}
	if len(names) != len(want) {
		t.Errorf("tools %v, want %d", names, len(want))
	}
	// The limits the domain enforces are in the schema, for the model.
	for _, tool := range res.Tools {
		if tool.Name != mcpserver.ToolSearch {
			continue
		}
		props := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
		mode := props["mode"].(map[string]any)
		k := props["k"].(map[string]any)
		if len(mode["enum"].([]any)) != 3 || k["maximum"] != float64(memory.MaxK) {
			t.Errorf("search schema: mode %v, k %v", mode, k)
		}
		if req := tool.InputSchema.(map[string]any)["required"]; len(req.([]any)) != 1 {
			t.Errorf("search requires %v, want only query", req)
		}
	}
}

func TestSearch(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, f *fixture) {
		t.Run("OK", func(t *testing.T) {
			out := mustCall(t, f.cs, mcpserver.ToolSearch, map[string]any{"query": "Lisbon hotel booking code", "k": 3})
			got := out["results"].([]any)
			if len(got) == 0 || len(got) > 3 {
				t.Fatalf("%d results: %v", len(got), got)
			}
			first := got[0].(map[string]any)
			if !strings.Contains(first["content"].(string), "QX-4471") || first["session_id"] != "trip" || first["id"] != f.ids[3] {
				t.Errorf("first result %v, want turn 3 of trip", first)
			}
			if first["score"].(float64) <= 0 || first["state"] == "" || first["created_at"] == "" {
				t.Errorf("result lacks score, state or time: %v", first)
			}
		})
		t.Run("OneSessionTextMode", func(t *testing.T) {
			out := mustCall(t, f.cs, mcpserver.ToolSearch, map[string]any{"query": "QX-4471", "session": "trip", "mode": "text"})
			if got := ids(out["results"]); len(got) == 0 || got[0] != f.ids[3] {
				t.Errorf("text search found %v, want %s first", got, f.ids[3])
			}
		})
		t.Run("NoMatchIsEmptyList", func(t *testing.T) {
			out := mustCall(t, f.cs, mcpserver.ToolSearch, map[string]any{"query": "Lisbon", "session": "no-such-session"})
			if got, ok := out["results"].([]any); !ok || len(got) != 0 {
				t.Errorf("results %v, want []", out["results"])
			}
		})
		for name, args := range map[string]map[string]any{
			"ErrEmptyQuery":     {"query": ""},
			"ErrBlankQuery":     {"query": "   "},
			"ErrNoQuery":        {"session": "trip"},
			"ErrBadMode":        {"query": "x", "mode": "fuzzy"},
			"ErrKTooLarge":      {"query": "x", "k": 101},
			"ErrKNegative":      {"query": "x", "k": -1},
			"ErrKNotNumber":     {"query": "x", "k": "ten"},
			"ErrBadSession":     {"query": "x", "session": "../etc"},
			"ErrUnknownArg":     {"query": "x", "sesion": "trip"},
			"ErrQueryNotString": {"query": 42},
		} {
			t.Run(name, func(t *testing.T) { mustFail(t, f.cs, mcpserver.ToolSearch, args, memory.EINVALID) })
		}
		// A refusal names the argument and what it may be.
		if msg := mustFail(t, f.cs, mcpserver.ToolSearch, map[string]any{"query": "x", "mode": "fuzzy"}, memory.EINVALID); !strings.Contains(msg, "mode") || !strings.Contains(msg, "hybrid") {
			t.Errorf("bad mode: %q", msg)
		}
	})
}

func TestSave(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, f *fixture) {
		t.Run("PinnedByDefault", func(t *testing.T) {
			out := mustCall(t, f.cs, mcpserver.ToolSave, map[string]any{"session": "notes", "content": "The user prefers window seats.",
				"metadata": map[string]any{"topic": "travel", "weight": 2}})
			id, _ := out["id"].(string)
			if id == "" || out["tokens"].(float64) <= 0 || out["session"].(map[string]any)["id"] != "notes" {
				t.Fatalf("answer %v", out)
			}
			m := mustCall(t, f.cs, mcpserver.ToolGet, map[string]any{"id": id})
			if m["pinned"] != true || m["role"] != "system" || m["content"] != "The user prefers window seats." ||
				m["metadata"].(map[string]any)["topic"] != "travel" {
				t.Errorf("stored note %v", m)
			}
			// A pinned note is in every window of its session.
			w := mustCall(t, f.cs, mcpserver.ToolContext, map[string]any{"session": "notes", "prompt": "anything"})
			if !slices.Contains(ids(w["messages"]), id) {
				t.Errorf("window %v lacks the pinned note", w["messages"])
			}
		})
		t.Run("ImportantUnpinned", func(t *testing.T) {
			out := mustCall(t, f.cs, mcpserver.ToolSave, map[string]any{"session": "trip", "content": "Decided: take the night train.",
				"pinned": false, "important": true})
			m := mustCall(t, f.cs, mcpserver.ToolGet, map[string]any{"id": out["id"]})
			if m["pinned"] == true || m["important"] != true || m["role"] != "assistant" || m["session_id"] != "trip" {
				t.Errorf("stored note %v", m)
			}
		})
		t.Run("RoleUser", func(t *testing.T) {
			out := mustCall(t, f.cs, mcpserver.ToolSave, map[string]any{"session": "notes", "content": "I am vegetarian.", "role": "user"})
			if m := mustCall(t, f.cs, mcpserver.ToolGet, map[string]any{"id": out["id"]}); m["role"] != "user" || m["pinned"] != true {
				t.Errorf("stored note %v", m)
			}
		})
		before := mustCall(t, f.cs, mcpserver.ToolStatus, map[string]any{"session": "notes"})
		for name, args := range map[string]map[string]any{
			"ErrNeitherPinnedNorImportant": {"session": "notes", "content": "x", "pinned": false},
			"ErrRoleTool":                  {"session": "notes", "content": "x", "role": "tool"},
			"ErrRoleUnknown":               {"session": "notes", "content": "x", "role": "narrator"},
			"ErrEmptyContent":              {"session": "notes", "content": ""},
			"ErrNoSession":                 {"content": "x"},
			"ErrBadSession":                {"session": ".hidden", "content": "x"},
			"ErrNestedMetadata":            {"session": "notes", "content": "x", "metadata": map[string]any{"a": map[string]any{"b": 1}}},
			"ErrPinnedNotBool":             {"session": "notes", "content": "x", "pinned": "yes"},
		} {
			t.Run(name, func(t *testing.T) { mustFail(t, f.cs, mcpserver.ToolSave, args, memory.EINVALID) })
		}
		if msg := mustFail(t, f.cs, mcpserver.ToolSave, map[string]any{"session": "notes", "content": "x", "metadata": map[string]any{"a": []any{1}}}, memory.EINVALID); !strings.HasPrefix(msg, "invalid_request: metadata.a: ") {
			t.Errorf("bad metadata: %q names the note as a batch's message", msg)
		}
		// A refused note stored nothing.
		after := mustCall(t, f.cs, mcpserver.ToolStatus, map[string]any{"session": "notes"})
		if before["tokens"] != after["tokens"] || before["messages"].(map[string]any)["active"] != after["messages"].(map[string]any)["active"] {
			t.Errorf("refused saves changed the session: %v -> %v", before, after)
		}
		t.Run("ErrPinnedBudget", func(t *testing.T) {
			// Pinned notes share a budget of the session's window: past it the
			// domain's conflict comes back as is.
			long := strings.Repeat("The user likes long detailed itineraries with every connection listed. ", 400)
			mustFail(t, f.cs, mcpserver.ToolSave, map[string]any{"session": "trip", "content": long}, memory.ECONFLICT)
		})
	})
}

func TestContext(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, f *fixture) {
		t.Run("RecoversForThePrompt", func(t *testing.T) {
			out := mustCall(t, f.cs, mcpserver.ToolContext, map[string]any{"session": "trip",
				"prompt": "what was the booking code of the hotel in Lisbon?", "max_tokens": 1500})
			msgs := out["messages"].([]any)
			if len(msgs) == 0 || out["tokens"].(float64) > 1500 || out["max_tokens"] != float64(1500) {
				t.Fatalf("window of %d messages, %v tokens, budget %v", len(msgs), out["tokens"], out["max_tokens"])
			}
			var found bool
			for _, m := range msgs {
				m := m.(map[string]any)
				if m["source"] == "" {
					t.Errorf("message without a source: %v", m)
				}
				found = found || strings.Contains(m["content"].(string), "QX-4471")
			}
			if !found {
				t.Errorf("the window for the question lacks the booking code: %v", msgs)
			}
			if _, ok := out["recovered"].([]any); !ok {
				t.Errorf("recovered %v, want a list", out["recovered"])
			}
		})
		t.Run("DefaultBudget", func(t *testing.T) {
			out := mustCall(t, f.cs, mcpserver.ToolContext, map[string]any{"session": "trip"})
			if out["max_tokens"].(float64) <= 0 || out["tokens"].(float64) > out["max_tokens"].(float64) {
				t.Errorf("default window: %v tokens of %v", out["tokens"], out["max_tokens"])
			}
		})
		t.Run("ErrUnknownSession", func(t *testing.T) {
			mustFail(t, f.cs, mcpserver.ToolContext, map[string]any{"session": "nope", "prompt": "x"}, memory.ENOTFOUND)
		})
		for name, args := range map[string]map[string]any{
			"ErrZeroBudget":     {"session": "trip", "max_tokens": 0},
			"ErrNegativeBudget": {"session": "trip", "max_tokens": -5},
			"ErrHugeBudget":     {"session": "trip", "max_tokens": 20_000_000},
			"ErrNoSession":      {"prompt": "x"},
		} {
			t.Run(name, func(t *testing.T) { mustFail(t, f.cs, mcpserver.ToolContext, args, memory.EINVALID) })
		}
		// An agent's newest input is often a long tool output: taken whole
		// up to the size of a message.
		t.Run("LongPrompt", func(t *testing.T) {
			mustCall(t, f.cs, mcpserver.ToolContext, map[string]any{"session": "trip", "prompt": strings.Repeat("x", memory.MaxQueryBytes+1), "max_tokens": 100000})
			mustFail(t, f.cs, mcpserver.ToolContext, map[string]any{"session": "trip", "prompt": strings.Repeat("x", memory.DefaultLimits.MaxContentBytes+1)}, memory.ETOOLARGE)
		})
		if msg := mustFail(t, f.cs, mcpserver.ToolContext, map[string]any{"session": "trip", "max_tokens": 0}, memory.EINVALID); !strings.Contains(msg, "omit max_tokens") {
			t.Errorf("zero budget: %q", msg)
		}
	})
}

func TestRecover(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, f *fixture) {
		t.Run("OK", func(t *testing.T) {
			out := mustCall(t, f.cs, mcpserver.ToolRecover, map[string]any{"id": f.cold, "session": "trip"})
			if out["id"] != f.cold || out["state"] != string(memory.StateRecovered) {
				t.Errorf("recovered %v", out)
			}
			// Twice is not an error.
			mustCall(t, f.cs, mcpserver.ToolRecover, map[string]any{"id": f.cold, "session": "trip"})
		})
		t.Run("SessionFromTheMessage", func(t *testing.T) {
			ctx := memory.NewContextWithTenant(context.Background(), "t1")
			cold, _, err := f.h.ListMessages(ctx, "trip", []string{"dropped", "summarized"}, "", 1)
			if err != nil || len(cold) == 0 {
				t.Fatalf("no cold message left (%v)", err)
			}
			out := mustCall(t, f.cs, mcpserver.ToolRecover, map[string]any{"id": cold[0].ID})
			if out["state"] != string(memory.StateRecovered) || out["session_id"] != "trip" {
				t.Errorf("recovered %v", out)
			}
		})
		t.Run("ErrUnknownID", func(t *testing.T) {
			mustFail(t, f.cs, mcpserver.ToolRecover, map[string]any{"id": "01NOSUCHMESSAGE"}, memory.ENOTFOUND)
			mustFail(t, f.cs, mcpserver.ToolRecover, map[string]any{"id": "01NOSUCHMESSAGE", "session": "trip"}, memory.ENOTFOUND)
		})
		t.Run("ErrOtherSession", func(t *testing.T) {
			mustCall(t, f.cs, mcpserver.ToolSave, map[string]any{"session": "other", "content": "x"})
			mustFail(t, f.cs, mcpserver.ToolRecover, map[string]any{"id": f.ids[0], "session": "other"}, memory.ENOTFOUND)
		})
		for name, args := range map[string]map[string]any{
			"ErrEmptyID":    {"id": ""},
			"ErrNoID":       {"session": "trip"},
			"ErrBadSession": {"id": f.cold, "session": "a/b"},
		} {
			t.Run(name, func(t *testing.T) { mustFail(t, f.cs, mcpserver.ToolRecover, args, memory.EINVALID) })
		}
	})
}

func TestGet(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, f *fixture) {
		out := mustCall(t, f.cs, mcpserver.ToolGet, map[string]any{"id": f.ids[3]})
		if out["id"] != f.ids[3] || out["session_id"] != "trip" || !strings.Contains(out["content"].(string), "Casa Azul") || out["role"] != "assistant" {
			t.Errorf("message %v", out)
		}
		// A cold message reads back with its state.
		if out := mustCall(t, f.cs, mcpserver.ToolGet, map[string]any{"id": f.cold}); out["state"] != "summarized" && out["state"] != "dropped" {
			t.Errorf("cold message %v", out)
		}
		mustFail(t, f.cs, mcpserver.ToolGet, map[string]any{"id": "01NOSUCHMESSAGE"}, memory.ENOTFOUND)
		mustFail(t, f.cs, mcpserver.ToolGet, map[string]any{"id": ""}, memory.EINVALID)
		mustFail(t, f.cs, mcpserver.ToolGet, map[string]any{}, memory.EINVALID)
		mustFail(t, f.cs, mcpserver.ToolGet, map[string]any{"id": 7}, memory.EINVALID)
	})
}

func TestSessionStatus(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, f *fixture) {
		out := mustCall(t, f.cs, mcpserver.ToolStatus, map[string]any{"session": "trip"})
		counts := out["messages"].(map[string]any)
		if out["id"] != "trip" || out["context_window"] != float64(2000) || out["tokens"].(float64) <= 0 ||
			counts["summarized"].(float64)+counts["dropped"].(float64) == 0 || out["compactions"].(float64) == 0 {
			t.Errorf("status %v", out)
		}
		t.Run("FlushDue", func(t *testing.T) {
			// A window shrunk to just under the compaction trigger: the agent is
			// told to save its notes before anything is lost.
			ctx := memory.NewContextWithTenant(context.Background(), "t1")
			res, err := f.h.Append(ctx, "flush", []*memory.Message{{Role: memory.RoleUser, Content: strings.Repeat("we planned the route ", 60)}})
			if err != nil {
				t.Fatal(err)
			}
			window := int(float64(res.Session.Tokens) / 0.45)
			if _, err := f.h.PutSession(ctx, "flush", memory.SessionUpdate{ContextWindow: &window}); err != nil {
				t.Fatal(err)
			}
			out := mustCall(t, f.cs, mcpserver.ToolStatus, map[string]any{"session": "flush"})
			if out["state"] != memory.WindowFlushDue || out["flush_due"] != true || !strings.HasPrefix(fmt.Sprint(out["flush_prompt"]), memory.FlushPrompt) || out["note_room_tokens"] == nil {
				t.Errorf("status %v, want flush_due with the prompt", out)
			}
		})
		mustFail(t, f.cs, mcpserver.ToolStatus, map[string]any{"session": "nope"}, memory.ENOTFOUND)
		mustFail(t, f.cs, mcpserver.ToolStatus, map[string]any{"session": ""}, memory.EINVALID)
		mustFail(t, f.cs, mcpserver.ToolStatus, map[string]any{}, memory.EINVALID)
	})
}

func TestSessionResource(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		tmpl, err := f.cs.ListResourceTemplates(ctx, nil)
		if err != nil || len(tmpl.ResourceTemplates) != 1 || tmpl.ResourceTemplates[0].URITemplate != "ctxd://sessions/{id}" {
			t.Fatalf("templates %v (%v)", tmpl, err)
		}
		res, err := f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.SessionURI("trip")})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" || !strings.Contains(res.Contents[0].Text, `"context_window":2000`) {
			t.Errorf("contents %+v", res.Contents)
		}
		if _, err := f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.SessionURI("nope")}); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("unknown session: %v, want not found", err)
		}
		if _, err := f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ctxd://sessions/.x"}); err == nil || !strings.Contains(err.Error(), "session id") {
			t.Errorf("bad session id: %v", err)
		}
	})
}

// failingBackend fails every read with an error of the store's own, whose
// text must not reach the client.
type failingBackend struct{ *mcpserver.ServiceBackend }

func (failingBackend) Message(context.Context, string) (*memory.Message, error) {
	return nil, errors.New("open /var/lib/ctxd/ctxd.db: input/output error")
}

func TestInternalErrorIsNotDescribed(t *testing.T) {
	t.Parallel()
	cs := connect(t, failingBackend{})
	msg := mustFail(t, cs, mcpserver.ToolGet, map[string]any{"id": "x"}, memory.EINTERNAL)
	if strings.Contains(msg, "/var/lib") {
		t.Errorf("internal detail reached the client: %q", msg)
	}
}

func TestUnreachableServerIsUnavailable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there now
	c, err := client.New(srv.URL, client.WithRetries(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, &mcpserver.ClientBackend{Client: c})
	msg := mustFail(t, cs, mcpserver.ToolGet, map[string]any{"id": "x"}, memory.EUNAVAILABLE)
	if !strings.Contains(msg, srv.URL) {
		t.Errorf("%q does not say which server", msg)
	}
}
