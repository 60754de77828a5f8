package scoring

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func termKind(terms []Term, text string) (Kind, bool) {
	for _, t := range terms {
		if t.Text == text {
			return t.Kind, true
		}
	}
	return 0, false
}

func TestTermsKinds(t *testing.T) {
	tests := []struct {
		text string // the term in a sentence
		term string // as Terms normalises it
		kind Kind
	}{
		{"we hit ERR_CONN_RESET again", "err_conn_reset", KindIdent},
		{"call getUserById first", "getuserbyid", KindIdent},
		{"MAX_RETRIES is 5", "max_retries", KindIdent},
		{"use the v2 API", "v2", KindIdent},
		{"ticket JIRA-123 is open", "jira-123", KindIdent},
		{"ticket PROJ-4521 is open", "proj-4521", KindIdent},
		{"the key abc123 expired", "abc123", KindIdent},
		{"commit 7f9c2ab broke it", "7f9c2ab", KindIdent},
		{"request 550e8400-e29b-41d4-a716-446655440000 failed", "550e8400-e29b-41d4-a716-446655440000", KindIdent},
		{"call os.ReadFile there", "os.readfile", KindIdent},
		{"mail bob@example.com today", "bob@example.com", KindIdent},
		{"see #1234 for context", "#1234", KindIdent},
		{"run with --dry-run first", "--dry-run", KindIdent},
		{"edit /etc/nginx/nginx.conf now", "/etc/nginx/nginx.conf", KindPath},
		{"edit /etc/nginx/nginx.conf now", "nginx.conf", KindPath},
		{"error at main.go:42:7 here", "main.go", KindPath},
		{"run ./build.sh please", "build.sh", KindPath},
		{`open C:\Users\bob\notes.txt now`, `c:\users\bob\notes.txt`, KindPath},
		{"look in pkg/file.ext too", "pkg/file.ext", KindPath},
		{"set it in .env locally", ".env", KindPath},
		{"read https://x.io/a for details", "https://x.io/a", KindURL},
		{"see (https://x.io/a?b=1&c=2).", "https://x.io/a?b=1&c=2", KindURL},
		{"listen on 8080 now", "8080", KindNumber},
		{"pi is 3.14 roughly", "3.14", KindNumber},
		{"p99 went to 20ms today", "20ms", KindNumber},
		{"it cost $400 total", "$400", KindNumber},
		{"it cost $400 total", "400", KindNumber},
		{"we have 1,234 rows", "1234", KindNumber},
		{"disk at 95% full", "95%", KindNumber},
		{"shipped on 2024-05-08 finally", "2024-05-08", KindNumber},
		{`it said "connection reset by peer" twice`, "connection reset by peer", KindQuote},
		{"it said “connection reset by peer” twice", "connection reset by peer", KindQuote},
		{"he said 'use the cache' then", "use the cache", KindQuote},
		{"the nginx proxy", "nginx", KindWord},
		{"two timeouts", "timeout", KindWord},
		{"many queries", "query", KindWord},
		{"Überprüfung läuft", "überprüfung", KindWord},
	}
	for _, tt := range tests {
		terms := Terms(tt.text)
		k, ok := termKind(terms, tt.term)
		if !ok || k != tt.kind {
			t.Errorf("Terms(%q): %q is %v (found %v), want %v; all: %v", tt.text, tt.term, k, ok, tt.kind, terms)
		}
	}
}

func TestTermsExcluded(t *testing.T) {
	tests := []struct{ text, term string }{
		{"the cat and the hat", "the"},
		{"the cat and the hat", "and"},
		{"I think it would be great", "think"},
		{"it's done", "it"},
		{"Corinne's car", "s"},
		{"page 12 of it", "12"},
		{"the 3rd time", "3rd"},
		{"a b c", "b"},
		{"and/or", "and/or"},
		{"e.g. this", "e.g"},
		{"one-off", "one-off"}, // prose compounds are their words only
		{"don't 'split' me", "split"},
	}
	for _, tt := range tests {
		terms := Terms(tt.text)
		if k, ok := termKind(terms, tt.term); ok && !(tt.term == "split" && k == KindWord) {
			t.Errorf("Terms(%q) has %q as %v; want it left out; all: %v", tt.text, tt.term, k, terms)
		}
	}
	if terms := Terms("don't 'split' me"); slices.ContainsFunc(terms, func(t Term) bool { return t.Kind == KindQuote }) {
		t.Errorf("a quoted single word is a quote: %v", terms)
	}
}

func TestTermsDistinctStrongestKind(t *testing.T) {
	// "Deploy_Key" is an identifier in one place and a quoted phrase's word
	// in none: it must come once, as an identifier, whatever the order.
	terms := Terms("deploy_key then Deploy_Key then DEPLOY_KEY")
	n := 0
	for _, term := range terms {
		if term.Text == "deploy_key" {
			n++
			if term.Kind != KindIdent {
				t.Errorf("kind %v, want ident", term.Kind)
			}
		}
	}
	if n != 1 {
		t.Errorf("deploy_key appears %d times in %v, want once", n, terms)
	}
	// The path's base name is a path, though it is a bare file name too.
	if k, _ := termKind(Terms("nginx.conf and /etc/nginx/nginx.conf"), "nginx.conf"); k != KindPath {
		t.Errorf("nginx.conf is %v, want path", k)
	}
}

func TestTermsNeverMentions(t *testing.T) {
	for _, text := range []string{"01HZX3K4M5N6P7Q8R9S0T1V2W3 was it", "msg-123 and @alice"} {
		for _, term := range Terms(text) {
			if term.Kind == KindMention || term.Kind == kindField {
				t.Errorf("Terms(%q) returned %v", text, term)
			}
		}
	}
}

func TestKindNames(t *testing.T) {
	for k := KindWord; k <= KindMention; k++ {
		b, _ := k.MarshalText()
		if s := k.String(); s == "unknown" || s == "" || string(b) != s {
			t.Errorf("kind %d has name %q / %q", k, s, b)
		}
	}
	if Kind(99).String() != "unknown" {
		t.Error("an unknown kind has a name")
	}
}

// FuzzTerms checks that no text makes Terms panic or return junk; go test
// runs the seeds, go test -fuzz FuzzTerms explores.
func FuzzTerms(f *testing.F) {
	for _, s := range []string{
		"", " ", "'", `"`, "`", "```", "``` x ```", "://", "a://", "x://y", "$", "$$4", "-", "--", "#", ".", "./", "../", "~/",
		"C:", `C:\`, "1,", ",1", "1,2,3", "1.2.3.4", "\xff\xfe", "“unclosed", "“a b”", "'a b'", "' a b '", "é'è'à",
		"http://" + strings.Repeat("a", 2000), strings.Repeat("x_", 300), "a.b.c.d.e.f", "main.go:1:2:3", "v1.2.3-rc.1",
		"550e8400-e29b-41d4-a716-44665544000g", "1st 2nd 3rd 4th 100th", "日本語のテキスト", "ERR_\u0301X",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		terms := Terms(s)
		seen := map[string]bool{}
		for _, term := range terms {
			if term.Text == "" || term.Kind < KindWord || term.Kind > KindURL {
				t.Fatalf("Terms(%q) returned %+v", s, term)
			}
			if seen[term.Text] {
				t.Fatalf("Terms(%q) returned %q twice", s, term.Text)
			}
			seen[term.Text] = true
			if utf8.ValidString(s) && !utf8.ValidString(term.Text) {
				t.Fatalf("Terms(%q) returned invalid UTF-8 %q", s, term.Text)
			}
		}
		if again := Terms(s); !slices.Equal(terms, again) {
			t.Fatalf("Terms(%q) is not deterministic", s)
		}
	})
}
