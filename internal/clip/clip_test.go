package clip

import "testing"

func TestString(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc… (4 bytes)"},
		{"aé", 2, "a… (3 bytes)"}, // not inside the é
		{"éé", 0, "… (4 bytes)"},
		{"abcd", -1, "abcd"},
	} {
		if got := String(c.s, c.n); got != c.want {
			t.Errorf("String(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// A clipped text and its original have the same head, wherever the cut
// falls in a character.
func TestHeadOfClipped(t *testing.T) {
	s := "ab" + "éééé" + "xyz"
	for n := 0; n <= len(s); n++ {
		if h, hc := Head(s, n), Head(String(s, n), n); h != hc {
			t.Errorf("n=%d: Head = %q, of the clipped text %q", n, h, hc)
		}
	}
}
