package summarize

import (
	"slices"
	"testing"
)

func TestSplitSentences(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"First one. Second one! Third? Yes.", []string{"First one.", "Second one!", "Third?", "Yes."}},
		{"Use a helper, e.g. a closure. Then test it.", []string{"Use a helper, e.g. a closure.", "Then test it."}},
		{"Pick one (i.e., the fast one). Done.", []string{"Pick one (i.e., the fast one).", "Done."}},
		{"Ask Mr. Smith and Dr. Jones. They know.", []string{"Ask Mr. Smith and Dr. Jones.", "They know."}},
		{"Upgrade to v1.2.3 before Friday. Version 2.0.1. Next.", []string{"Upgrade to v1.2.3 before Friday.", "Version 2.0.1.", "Next."}},
		{"Edit memory/store.go and ./cmd/ctxd/main.go now. Then run it.", []string{"Edit memory/store.go and ./cmd/ctxd/main.go now.", "Then run it."}},
		{"See https://example.com/a.b/c.html?x=1.2 for details. Thanks.", []string{"See https://example.com/a.b/c.html?x=1.2 for details.", "Thanks."}},
		{"The config lives in /etc/ctxd.yaml. Reload it.", []string{"The config lives in /etc/ctxd.yaml.", "Reload it."}},
		{`He said "stop." Then he left.`, []string{`He said "stop."`, "Then he left."}},
		{"ok. let's go", []string{"ok. let's go"}},
		{"the tests pass. then deploy", []string{"the tests pass.", "then deploy"}},
		{"1. Install it\n2. Run it", []string{"1. Install it", "2. Run it"}},
		{"J. R. R. Tolkien wrote it. Read it.", []string{"J. R. R. Tolkien wrote it.", "Read it."}},
		{"Wait... What happened?! Nothing.", []string{"Wait...", "What happened?!", "Nothing."}},
		{"Line one\n\n  \nLine two.", []string{"Line one", "Line two."}},
		{"これはペンです。あれは本です！本当？", []string{"これはペンです。", "あれは本です！", "本当？"}},
		{"Ça marche très bien. Über alles… Ende.", []string{"Ça marche très bien.", "Über alles…", "Ende."}},
		{"Costs approx. five dollars vs. ten. OK.", []string{"Costs approx. five dollars vs. ten.", "OK."}},
		{"etc. Then more etc. Fine.", []string{"etc.", "Then more etc.", "Fine."}},
		{"...", nil},
		{"", nil},
		{"No terminator at all", []string{"No terminator at all"}},
		{"Call foo.Bar(). It works.", []string{"Call foo.Bar().", "It works."}},
	}
	for _, c := range cases {
		if got := splitSentences(c.in); !slices.Equal(got, c.want) {
			t.Errorf("splitSentences(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestFeatures(t *testing.T) {
	cases := []struct {
		in    string
		check func(features) bool
	}{
		{"rename max_tokens to maxTokens in SummaryRequest", func(f features) bool { return f.idents == 3 }},
		{"see PROJ-123 and commit 3f2a9c1d", func(f features) bool { return f.idents == 2 }},
		{"id 123e4567-e89b-12d3-a456-426614174000", func(f features) bool { return f.idents >= 1 }},
		{"the facade is dead", func(f features) bool { return f.idents == 0 }},
		{"edit memory/store.go now", func(f features) bool { return f.path }},
		{"read and/or write", func(f features) bool { return !f.path }},
		{"see https://x.io/a", func(f features) bool { return f.url }},
		{"we decided to go with bbolt", func(f features) bool { return f.decision }},
		{"the build failed with exit 2", func(f features) bool { return f.error && f.number }},
		{"TODO: add tests", func(f features) bool { return f.todo }},
		{"what about Windows?", func(f features) bool { return f.question && f.name }},
		{"never write to /tmp", func(f features) bool { return f.constraint && f.path }},
		{"Thanks!", func(f features) bool { return f.filler }},
		{"Sounds good, thanks.", func(f features) bool { return f.filler }},
		{"ship it by 2026-01-15", func(f features) bool { return f.date }},
		{"I think JSON is fine", func(f features) bool { return !f.name }},
	}
	for _, c := range cases {
		if f := analyze(c.in); !c.check(f) {
			t.Errorf("analyze(%q) = %+v", c.in, f)
		}
	}
}
