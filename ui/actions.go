package ui

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ctxd/ctxd/memory"
)

type windowView struct {
	Prompt, MaxTokens string
	Result            *memory.ContextResult
}

// Levels lists the budget's levels in the order the builder fills them.
func (v windowView) Levels() []struct {
	Name   string
	Tokens int
} {
	var out []struct {
		Name   string
		Tokens int
	}
	for _, l := range []string{memory.SourcePinned, memory.SourceRecent, memory.SourceSummary, memory.SourceRecovered, memory.SourceWorking} {
		if n := v.Result.Budget.Levels[l]; n > 0 {
			out = append(out, struct {
				Name   string
				Tokens int
			}{l, n})
		}
	}
	return out
}

// Recovers reports whether the call would move id back into the window.
func (v windowView) Recovers(id string) bool {
	for _, r := range v.Result.Recovered {
		if r == id {
			return true
		}
	}
	return false
}

// windowPreview builds the window the next context call would build for
// the prompt typed, with scores explained, and changes nothing: the
// preview is for looking, and recovering is the recover button's job.
func (h *Handler) windowPreview(w http.ResponseWriter, r *http.Request) {
	v := &windowView{Prompt: r.PostFormValue("prompt"), MaxTokens: strings.TrimSpace(r.PostFormValue("max_tokens"))}
	req := memory.ContextRequest{Prompt: v.Prompt, Explain: true, Preview: true}
	if v.MaxTokens != "" {
		n, err := strconv.Atoi(v.MaxTokens)
		if err != nil || n < 1 {
			h.fail(w, r, memory.Errorf(memory.EINVALID, "max_tokens: %q is not a positive number of tokens; leave it empty for the session's default", v.MaxTokens))
			return
		}
		req.MaxTokens = n
	}
	res, err := h.svc.Context(r.Context(), r.PathValue("id"), req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Result = res
	if isFragment(r) {
		h.renderFragment(w, "session", "window", v)
		return
	}
	h.renderSession(w, r, v)
}

// flashes are the notes a page shows after an action; the URL names one,
// so a link cannot put words of its own on our page.
var flashes = map[string]string{
	"recovered":  "Recovered: the message is back in the working window.",
	"note-saved": "Note saved.",
	"note-added": "Pinned note added.",
}

// backTo is the page an action returns to (a page of ours, else the
// fallback), with its flash.
func backTo(back, fallback, flash string) string {
	u, err := url.Parse(safeNext(back))
	if err != nil || back == "" {
		u, _ = url.Parse(fallback)
	}
	q := u.Query()
	q.Set("flash", flash)
	u.RawQuery = q.Encode()
	return u.String()
}

type coldRowView struct {
	M    *memory.Message
	Back string
}

// recoverMessage puts a cold message back into the session's window, as
// POST /v1/sessions/{id}/messages/{message_id}/recover does.
func (h *Handler) recoverMessage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	m, err := h.svc.Recover(r.Context(), id, r.PathValue("mid"), "", 0)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if isFragment(r) {
		h.renderFragment(w, "cold", "coldrow", coldRowView{M: m})
		return
	}
	http.Redirect(w, r, backTo(r.PostFormValue("back"), "/ui/sessions/"+id+"/cold", "recovered"), http.StatusSeeOther)
}

// editNote changes a pinned note's text, or unpins it, as PATCH
// /v1/messages/{id} does.
func (h *Handler) editNote(w http.ResponseWriter, r *http.Request) {
	content := r.PostFormValue("content")
	pinned := r.PostFormValue("pinned") == "on"
	res, err := h.svc.EditMessage(r.Context(), r.PathValue("mid"), memory.MessageEdit{Content: &content, Pinned: &pinned})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, backTo(r.PostFormValue("back"), "/ui/sessions/"+res.Message.SessionID+"#notes", "note-saved"), http.StatusSeeOther)
}

// addNote stores a pinned note in the session.
func (h *Handler) addNote(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// A note for a session that is not there would create it.
	if _, err := h.sessionFor(r); err != nil {
		h.fail(w, r, err)
		return
	}
	role := memory.Role(r.PostFormValue("role"))
	if role == "" {
		role = memory.RoleSystem // as memory_save's pinned notes
	}
	msg := &memory.Message{Role: role, Content: r.PostFormValue("content"), Pinned: true}
	if _, err := h.svc.Append(r.Context(), id, []*memory.Message{msg}); err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/ui/sessions/"+id+"?flash=note-added#notes", http.StatusSeeOther)
}
