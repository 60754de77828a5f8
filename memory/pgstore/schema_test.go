package pgstore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every table's primary key starts with the tenant, so that a distributed
// engine can shard every table by it: read from the catalog of a migrated
// database, not from the migrations' text.
func TestEveryPrimaryKeyStartsWithTenant(t *testing.T) {
	s := openTest(t)
	rows, err := s.pool.Query(bg, `/* all tenants: the catalog */
		SELECT c.relname, coalesce((SELECT a.attname FROM pg_constraint k
			JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
			WHERE k.conrelid = c.oid AND k.contype = 'p'), '')
		FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' ORDER BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var table, first string
		if err := rows.Scan(&table, &first); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, table)
		if first != "tenant" {
			t.Errorf("table %s: primary key starts with %q, want tenant", table, first)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The catalog query must have seen the schema, not an empty one.
	for _, want := range []string{"sessions", "messages", "changes", "change_counter", "meta", "rate_limits", "schema_migrations"} {
		if !slices.Contains(tables, want) {
			t.Fatalf("tables %v: no %s", tables, want)
		}
	}
}

// Every statement of the package that touches a table names the tenant
// (tenant = $n, or tenant first in an INSERT's or COPY's columns), or says
// in a leading /* all tenants: why */ that it reads or writes across them.
func TestEveryStatementNamesTheTenant(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var checked, across int
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stmts, bad := checkTenantNamed(t, f, src)
		checked += stmts
		for _, b := range bad {
			t.Errorf("%s", b)
		}
		across += strings.Count(string(src), allTenants)
	}
	if checked < 40 {
		t.Fatalf("checked %d statements: the check no longer finds the package's SQL", checked)
	}
	t.Logf("%d statements touch tables, %d of them across tenants", checked, across)

	// The check itself catches a statement that does not name the tenant.
	_, bad := checkTenantNamed(t, "sample.go", []byte("package p\nvar q = `UPDATE meta SET value = $1 WHERE key = $2`\n"+
		"var c = []string{\"op\", \"tenant\"}\nfunc f() { tx.CopyFrom(ctx, pgx.Identifier{\"changes\"}, []string{\"op\", \"tenant\"}, nil) }\n"))
	if len(bad) != 2 {
		t.Fatalf("the check on two statements that do not name the tenant found %v", bad)
	}
}

const allTenants = "/* all tenants:"

var (
	touches  = regexp.MustCompile(`(?i)\b(?:FROM|INTO|UPDATE|JOIN)\s+([a-z_]+)\b`)
	named    = regexp.MustCompile(`\btenant\s*=\s*(?:\$\d|ANY)`)
	inserted = regexp.MustCompile(`(?i)\bINTO\s+[a-z_]+(?:\s+AS\s+\w+)?\s*\(\s*tenant\b`)
)

// checkTenantNamed finds the SQL of a Go file (string literals, with the
// parts of a concatenation that are not literals read as ?), outside the
// migrations, and returns how many statements touch a table and those
// that do not name the tenant.
func checkTenantNamed(t *testing.T, name string, src []byte) (int, []string) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var bad []string
	ast.Inspect(f, func(node ast.Node) bool {
		switch x := node.(type) {
		case *ast.ValueSpec:
			return len(x.Names) != 1 || x.Names[0].Name != "migrations" // history, applied once
		case *ast.CallExpr:
			// CopyFrom(ctx, table, columns, rows): tenant first.
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "CopyFrom" && len(x.Args) == 4 {
				n++
				cols, ok := x.Args[2].(*ast.CompositeLit)
				if !ok || len(cols.Elts) == 0 || literal(cols.Elts[0]) != "tenant" {
					bad = append(bad, fset.Position(x.Pos()).String()+": a COPY without the tenant as its first column")
				}
				return false
			}
		case *ast.BinaryExpr, *ast.BasicLit:
			sql := concat(node.(ast.Expr))
			if sql == "" || !touches.MatchString(sql) {
				return true
			}
			n++
			if !strings.HasPrefix(strings.TrimSpace(sql), allTenants) && !named.MatchString(sql) && !inserted.MatchString(sql) {
				bad = append(bad, fset.Position(node.Pos()).String()+": names no tenant: "+strings.Join(strings.Fields(sql), " "))
			}
			return false
		}
		return true
	})
	return n, bad
}

// concat is a string concatenation's text, "" for anything else.
func concat(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.BasicLit:
		return literal(x)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return ""
		}
		l, r := concat(x.X), concat(x.Y)
		if l == "" && r == "" {
			return ""
		}
		return or(l, "?") + or(r, "?")
	}
	return ""
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func literal(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return ""
	}
	return s
}

// The rate limiter keeps a key's bucket under its tenant and a client
// address's under the store-wide tenant.
func TestRateLimitBucketsByTenant(t *testing.T) {
	s := openTest(t)
	l := s.RateLimiter(0.001, 2)
	l.Tenant = func(identity string) string {
		if strings.HasPrefix(identity, "key:") {
			return "acme"
		}
		return ""
	}
	for _, id := range []string{"key:0a1b", "key:0a1b", "ip:127.0.0.1"} {
		if ok, err := l.Allow(id); !ok || err != nil {
			t.Fatalf("%s: %v, %v", id, ok, err)
		}
	}
	if ok, _ := l.Allow("key:0a1b"); ok {
		t.Fatal("a third request of a burst of 2 went through")
	}
	rows, err := s.pool.Query(bg, `/* all tenants: the test reads every bucket */ SELECT tenant || '/' || identity FROM rate_limits ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		got = append(got, b)
	}
	if want := []string{"/ip:127.0.0.1", "acme/key:0a1b"}; !slices.Equal(got, want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
}
