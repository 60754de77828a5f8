package coldstore

import (
	"path/filepath"
	"strings"
	"testing"
)

var nastyNames = []string{
	"..", ".", "a/b", "%2F", "%", "%%", "a%2Fb", "..%2F..", "../../etc/passwd", `a\b`, "C:", "s:1:2",
	"UPPER", ".hidden", "trailing.", "ünïcødé", "日本語テナント", "e\u0301", "\u00e9", "emoji😀",
	"nul\x00byte", "new\nline", " spaces ", "a.b.c", "-dash", "_under", "~tilde", "CON", "x.jsonl",
	".rewrite-123", "\xff\xfe invalid utf8",
}

func TestEscapeRoundTrip(t *testing.T) {
	seen := map[string]string{}
	for _, name := range nastyNames {
		e := escape(name)
		if e == "" || e[0] == '.' || strings.ContainsAny(e, "/\\:\x00") || e == "." || e == ".." {
			t.Errorf("escape(%q) = %q: not a safe path element", name, e)
		}
		for i := 0; i < len(e); i++ {
			if e[i] >= 0x80 || e[i] < 0x20 {
				t.Errorf("escape(%q) = %q: not plain ASCII", name, e)
				break
			}
		}
		got, err := unescape(e)
		if err != nil || got != name {
			t.Errorf("unescape(escape(%q)) = %q, %v", name, got, err)
		}
		if prev, dup := seen[e]; dup {
			t.Errorf("%q and %q both escape to %q", prev, name, e)
		}
		seen[e] = name
	}
	// Session ids as API.md allows them stay readable, apart from ':'.
	if got := escape("01HX-abc_def.v2:7"); got != "01HX-abc_def.v2%3A7" {
		t.Errorf("escape(session id) = %q", got)
	}
}

func TestUnescapeRefusesOtherSpellings(t *testing.T) {
	for _, s := range []string{"", "%", "%2", "%2f", "%zz", "a:b", ".x", "%41", "a/b", "é"} {
		if got, err := unescape(s); err == nil {
			t.Errorf("unescape(%q) = %q, want error", s, got)
		}
	}
}

func TestPathsStayInside(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range nastyNames {
		for _, session := range []string{"..", "a/b", "s:1", "%2F"} {
			dir, file, err := s.paths(tenant, session)
			if err != nil {
				t.Fatalf("paths(%q, %q): %v", tenant, session, err)
			}
			if filepath.Dir(dir) != s.dir || filepath.Dir(file) != dir {
				t.Errorf("paths(%q, %q) = %q, %q: escapes %q", tenant, session, dir, file, s.dir)
			}
		}
	}
	for _, bad := range [][2]string{{"", "s"}, {"t", ""}, {strings.Repeat("x", 300), "s"}, {"t", strings.Repeat(":", 100)}} {
		if _, _, err := s.paths(bad[0], bad[1]); err == nil {
			t.Errorf("paths(%.20q, %.20q) accepted", bad[0], bad[1])
		}
	}
}
