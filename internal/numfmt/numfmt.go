// Package numfmt writes numbers for people: the CLI, the dashboard and the
// README figures show token counts and rates that run to millions.
package numfmt

import "strconv"

// Thousands writes n with comma separators: 128,000.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}
