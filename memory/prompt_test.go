package memory

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A long prompt ranks by its head and its tail, cut at rune boundaries.
func TestQueryPart(t *testing.T) {
	t.Parallel()
	short := strings.Repeat("a", 2*promptPartBytes)
	if got := queryPart(short); got != short {
		t.Fatalf("a prompt of %d bytes was cut to %d", len(short), len(got))
	}
	// "é" is two bytes: an odd offset of the cut falls inside one.
	long := "HEAD " + strings.Repeat("é", 3*promptPartBytes) + " TAIL"
	got := queryPart(long)
	if !utf8.ValidString(got) {
		t.Fatal("the part of the prompt is not valid UTF-8")
	}
	if !strings.HasPrefix(got, "HEAD ") || !strings.HasSuffix(got, " TAIL") {
		t.Errorf("the part lost the head or the tail: %.20q ... %.20q", got, got[len(got)-20:])
	}
	if len(got) > 2*promptPartBytes+1 {
		t.Errorf("the part is %d bytes, over 2 x %d", len(got), promptPartBytes)
	}
}
