package main

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// The dashboard's real login flow over HTTP, as a browser does it: the
// form's key buys a cookie that is not the key, the cookie opens the pages,
// and logging out revokes it on the server: a copy kept after logout (a
// shared machine, a stolen profile) opens nothing.
func TestDashboardLoginIsARevocableSession(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	ts.as(keyA).store("s", msg("user", "the valve notes"))
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar}
	get := func(c *http.Client, path string) (*http.Response, string) {
		t.Helper()
		res, err := c.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	if res, body := get(browser, "/ui/"); !strings.Contains(body, `name="key"`) || res.Request.URL.Path != "/ui/login" {
		t.Fatalf("before login: %d at %s", res.StatusCode, res.Request.URL)
	}
	res, err := browser.PostForm(ts.URL+"/ui/login", url.Values{"key": {keyA}, "next": {"/ui/sessions/s"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Request.URL.Path != "/ui/sessions/s" {
		t.Fatalf("login: %d at %s", res.StatusCode, res.Request.URL)
	}
	u, _ := url.Parse(ts.URL + "/ui/")
	var login *http.Cookie
	for _, c := range jar.Cookies(u) {
		if strings.Contains(c.Value, keyA) || strings.Contains(c.Value, base64.RawURLEncoding.EncodeToString([]byte(keyA))) {
			t.Fatalf("cookie %s holds the API key", c.Name)
		}
		if c.Name == "ctxd_login" {
			login = c
		}
	}
	if login == nil {
		t.Fatalf("no login cookie: %v", jar.Cookies(u))
	}
	// Another client with only a copy of the cookie is logged in too...
	thief := func() (*http.Response, string) {
		req, _ := http.NewRequest("GET", ts.URL+"/ui/sessions/s", nil)
		req.AddCookie(login)
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	if res, body := thief(); res.StatusCode != 200 || !strings.Contains(body, "Window over time") {
		t.Fatalf("with the cookie: %d", res.StatusCode)
	}
	// ... until the browser logs out.
	if res, err = browser.PostForm(ts.URL+"/ui/logout", url.Values{}); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Request.URL.Path != "/ui/login" {
		t.Fatalf("logout ended at %s", res.Request.URL)
	}
	if res, body := thief(); res.StatusCode != http.StatusSeeOther || strings.Contains(body, "Window over time") {
		t.Fatalf("a copy of the cookie after logout: %d, want 303 to the login page", res.StatusCode)
	}
	if res, _ := get(browser, "/ui/sessions/s"); res.Request.URL.Path != "/ui/login" {
		t.Fatalf("the browser after logout is at %s", res.Request.URL)
	}
}
