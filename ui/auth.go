package ui

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/ctxd/ctxd/memory"
)

// A login lives in a session cookie holding its token (see logins): no
// Expires, so the browser forgets it when it closes; HttpOnly, so no script
// (ours or an injected one) can read it; SameSite=Lax and Path=/ui/, so it
// goes with our pages and with a link someone followed to one, and with no
// other site's POST (which CrossOriginProtection refuses besides). A
// cookie rather than a header set by script lets every page be a plain
// link that can be bookmarked and shared.
const (
	loginCookie  = "ctxd_login"
	tenantCookie = "ctxd_tenant" // the tenant an admin key acts as
)

// requestKey is the key of the request's login; clients other than a
// browser may send the key as the API takes it.
func (h *Handler) requestKey(r *http.Request) string {
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(token)
	}
	if c, err := r.Cookie(loginCookie); err == nil {
		return h.logins.key(c.Value)
	}
	return ""
}

func requestTenant(r *http.Request) string {
	if c, err := r.Cookie(tenantCookie); err == nil {
		return c.Value
	}
	return ""
}

type callerKey struct{}

func callerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// admit checks the request's key (none needed without keys) and returns
// the request with the caller's tenant in its context.
func (h *Handler) admit(r *http.Request) (*http.Request, error) {
	c := Caller{Tenant: memory.DefaultTenant}
	if h.opts.Admit != nil {
		var err error
		if c, err = h.opts.Admit(r, h.requestKey(r), requestTenant(r)); err != nil {
			return nil, err
		}
	}
	ctx := memory.NewContextWithTenant(r.Context(), c.Tenant)
	return r.WithContext(context.WithValue(ctx, callerKey{}, c)), nil
}

// admitted serves next only to an admitted caller. A page asked for
// without a key goes to the login page, which comes back to it.
func (h *Handler) admitted(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ar, err := h.admit(r)
		if err != nil {
			if memory.ErrorCode(err) == memory.EUNAUTHORIZED && r.Method == http.MethodGet && !isFragment(r) {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			h.fail(w, r, err)
			return
		}
		if h.opts.TakeBody != nil {
			release, err := h.opts.TakeBody(w, ar)
			if err != nil {
				h.fail(w, ar, err)
				return
			}
			defer release()
		}
		next(w, ar)
	})
}

// safeNext is where to go after logging in: a page of ours, never another
// site ("//evil.example" is a path to the browser's URL parser too).
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix
	}
	return next
}

type loginView struct {
	Next, Error string
	Style       template.CSS
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	if !h.opts.KeysRequired {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	h.renderLogin(w, http.StatusOK, loginView{Next: safeNext(r.URL.Query().Get("next"))})
}

func (h *Handler) renderLogin(w http.ResponseWriter, status int, v loginView) {
	v.Style = template.CSS(stylesheet) // our own file, hashed into the CSP
	h.render(w, status, "login", v)
}

// LoginBodyLimit caps the body of the forms served before a key is given
// (login, logout): a key and a page to go back to fit in a few hundred
// bytes, and these bodies take no share of the server's in-flight budget.
const LoginBodyLimit = 4 << 10

// limitLoginBody refuses a login or logout body over LoginBodyLimit before
// reading it, and caps what is read of one of unknown length.
func (h *Handler) limitLoginBody(w http.ResponseWriter, r *http.Request) bool {
	if r.ContentLength > LoginBodyLimit {
		h.renderLogin(w, http.StatusRequestEntityTooLarge, loginView{Next: Prefix, Error: "The form is too large."})
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, LoginBodyLimit)
	return true
}

// login checks the key typed in and keeps it in the session cookie.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if !h.opts.KeysRequired {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	if !h.limitLoginBody(w, r) {
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	next := safeNext(r.PostFormValue("next"))
	if key == "" {
		h.renderLogin(w, http.StatusBadRequest, loginView{Next: next, Error: "Enter an API key."})
		return
	}
	if _, err := h.opts.Admit(r, key, ""); err != nil {
		status := http.StatusUnauthorized
		if memory.ErrorCode(err) == memory.ERATELIMITED {
			status = http.StatusTooManyRequests
		}
		h.renderLogin(w, status, loginView{Next: next, Error: memory.ErrorMessage(err)})
		return
	}
	token, err := h.logins.open(key)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	setCookie(w, r, loginCookie, token)
	clearCookie(w, r, tenantCookie)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if !h.limitLoginBody(w, r) {
		return
	}
	if c, err := r.Cookie(loginCookie); err == nil {
		h.logins.close(c.Value) // the cookie is worth nothing from now, kept or not
	}
	clearCookie(w, r, loginCookie)
	clearCookie(w, r, tenantCookie)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// pickTenant lets an admin key act as another tenant ("" for its own).
func (h *Handler) pickTenant(w http.ResponseWriter, r *http.Request) {
	tenant := strings.TrimSpace(r.PostFormValue("tenant"))
	if !callerOf(r.Context()).Admin {
		h.fail(w, r, memory.Errorf(memory.EFORBIDDEN, "only an admin key may act as another tenant"))
		return
	}
	if tenant == "" {
		clearCookie(w, r, tenantCookie)
	} else {
		// Admit checks the name before the cookie is kept.
		if _, err := h.opts.Admit(r, h.requestKey(r), tenant); err != nil {
			h.fail(w, r, err)
			return
		}
		setCookie(w, r, tenantCookie, tenant)
	}
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
}

func clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
}
