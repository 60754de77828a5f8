package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/server/servertest"
)

// TestRoutesMatchOpenAPI checks the contract against the server as composed
// (httpapi's routes and /metrics): every route echo serves is in the
// openapi.json the server answers and in docs/API.md's route table, and
// every route those document is served, methods included. The dashboard
// (/ui, and its icon at /favicon.ico) is HTML pages on any method, not
// part of the JSON API.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	url, m := servertest.Start(t, t.TempDir())

	served := map[string]bool{}
	for _, r := range m.HTTP.Echo().Routes() {
		if r.Path == "/ui" || strings.HasPrefix(r.Path, "/ui/") || r.Path == "/favicon.ico" {
			continue
		}
		served[r.Method+" "+normalizePath(r.Path)] = true
	}

	resp, err := http.Get(url + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("decode openapi.json: %v", err)
	}
	openapi := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			openapi[strings.ToUpper(method)+" "+normalizePath(path)] = true
		}
	}
	compareRoutes(t, "openapi.json", served, openapi)

	md, err := os.ReadFile(filepath.Join("..", "..", "docs", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	compareRoutes(t, "docs/API.md", served, apiMDRoutes(string(md)))
}

// compareRoutes reports the routes one side has and the other lacks.
func compareRoutes(t *testing.T, doc string, served, documented map[string]bool) {
	t.Helper()
	if len(documented) == 0 {
		t.Fatalf("%s documents no route", doc)
	}
	for _, r := range sortedKeys(served) {
		if !documented[r] {
			t.Errorf("%s is served but not in %s", r, doc)
		}
	}
	for _, r := range sortedKeys(documented) {
		if !served[r] {
			t.Errorf("%s is in %s but not served", r, doc)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pathParam is a parameter in echo's (:id) or OpenAPI's ({id}) form: only
// where parameters sit matters, not their names.
var pathParam = regexp.MustCompile(`:[a-z_]+|\{[a-z_]+\}`)

func normalizePath(p string) string { return pathParam.ReplaceAllString(p, "{}") }

// apiRoute is a row of docs/API.md's route table: "| `GET /v1/x?a=` |".
var apiRoute = regexp.MustCompile("(?m)^\\| `([A-Z]+) (/[^`?\\[ ]*)")

// apiMDRoutes reads the routes of docs/API.md's table.
func apiMDRoutes(md string) map[string]bool {
	routes := map[string]bool{}
	for _, m := range apiRoute.FindAllStringSubmatch(md, -1) {
		routes[m[1]+" "+normalizePath(m[2])] = true
	}
	return routes
}

// TestAPIMDRoutesParsed guards the reader above: a table row it skipped
// would make the comparison pass on fewer routes.
func TestAPIMDRoutesParsed(t *testing.T) {
	t.Parallel()
	got := apiMDRoutes("| `GET /v1/sessions?limit=&cursor=` | |\n| `POST /v1/sessions/{id}/context[?format=openai]` |\n| `/ui`, `/ui/...` |\n")
	want := map[string]bool{"GET /v1/sessions": true, "POST /v1/sessions/{}/context": true}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for r := range want {
		if !got[r] {
			t.Errorf("missing %s in %v", r, got)
		}
	}
}
