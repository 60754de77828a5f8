package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Python's functions as agent_replay.py uses them, so that the figures match
// the script's digit for digit.

// median is Python's statistics.median.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// pyRound is Python's round(x, n) for a float: both it and strconv round
// the exact binary value, ties to even.
func pyRound(x float64, n int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', n, 64), 64)
	return v
}

// pyDiv is Python's a / max(1, b) on whole numbers (a correctly rounded
// quotient, as float64 division of exactly converted numbers is).
func pyDiv(a, b float64) float64 { return a / math.Max(1, b) }

// pyStr is Python's str() of a figure: None, an int, or a float with at
// least one decimal.
func pyStr(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case float64:
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	return fmt.Sprint(v)
}
