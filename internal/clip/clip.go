// Package clip shortens quoted text in what ctxd writes for people to read
// (event logs, the cold mirror), saying how long it was.
package clip

import (
	"fmt"
	"unicode/utf8"
)

// String returns s if it has at most n bytes, else its first n bytes or
// fewer (whole characters) followed by "… (L bytes)", L the length of s.
// n < 0 keeps s whole.
func String(s string, n int) string {
	if n < 0 || len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", Head(s, n), len(s))
}

// Head is the longest start of s of at most n bytes that does not end
// inside a character. Head(String(s, n), n) == Head(s, n): what a clipped
// text and its original share.
func Head(s string, n int) string {
	if n < 0 || len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}
