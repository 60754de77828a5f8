package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/version"
)

// The running build is said in one form everywhere: `ctxd --version`,
// /healthz and the dashboard's footer.
func TestVersionShown(t *testing.T) {
	t.Parallel()
	want := version.Get().String()
	if r := runCLI(t, nil, "--version"); r.Code != 0 || strings.TrimSpace(r.Out) != "ctxd "+want {
		t.Errorf("ctxd --version: exit %d, %q, want %q", r.Code, r.Out, "ctxd "+want)
	}
	ts := startServer(t, t.TempDir())
	if got := ts.mustDo(200, "GET", "/healthz", nil)["version"]; got != want {
		t.Errorf("/healthz version %v, want %q", got, want)
	}
	res, err := http.Get(ts.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	page, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(page), `<footer class="foot">ctxd `+want+`</footer>`) {
		t.Errorf("the dashboard's footer does not name %q:\n%s", want, page)
	}
}
