package scoring

import (
	"strings"
	"unicode"
)

// A question that asks when (or for how long) is answered by a message that
// states a time: "yesterday", "last year", "seven years now", "in May",
// "2022". Neither its words nor its vector say so: the answer to "When did
// Teodor start his apprenticeship?" says "I started at the boatyard yesterday", and nothing of
// "yesterday" is in the question. On LoCoMo dev, 81% of the evidence turns
// of temporal questions state a time against 14% of all turns.

// AsksWhen reports whether a prompt asks for a time: when, how long, what or
// which year, month, date, day, week or time, how many years, months, weeks
// or days.
func AsksWhen(prompt string) bool {
	ws := words(prompt)
	for i, w := range ws {
		next := ""
		if i+1 < len(ws) {
			next = ws[i+1]
		}
		switch {
		case w == "when":
			return true
		case w == "how" && next == "long":
			return true
		case (w == "what" || w == "which") && timeNouns[next]:
			return true
		case w == "how" && next == "many" && i+2 < len(ws) && timeUnits[ws[i+2]]:
			return true
		}
	}
	return false
}

// StatesTime reports whether a text states a time: a relative day
// (yesterday, tonight), "ago", a month or weekday, a year, "last week",
// "this summer", or a count of time units ("two years", "3 months").
func StatesTime(text string) bool {
	ws := words(text)
	for i, w := range ws {
		prev := ""
		if i > 0 {
			prev = ws[i-1]
		}
		switch {
		case timeWords[w], weekdays[w], months[w]:
			return true
		case ambiguousMonths[w] && (datePrepositions[prev] || i+1 < len(ws) && isNumber(ws[i+1])):
			return true // "in May", "May 5", not "I may go"
		case isYear(w):
			return true
		case deictic[prev] && (timeUnits[w] || dayParts[w] || weekdays[w] || weekdayAbbrevs[w] || seasons[w]):
			return true
		case timeUnits[w] && (isNumber(prev) || quantities[prev]):
			return true
		}
	}
	return false
}

// words lowercases text and splits it into runs of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func isNumber(w string) bool {
	if numberWords[w] {
		return true
	}
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return w != ""
}

// isYear: 1900 to 2099.
func isYear(w string) bool {
	return len(w) == 4 && (strings.HasPrefix(w, "19") || strings.HasPrefix(w, "20")) && isNumber(w)
}

var (
	timeWords = setOf("yesterday", "today", "tonight", "tomorrow", "ago", "recently", "weekend", "weekends")
	weekdays  = setOf("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
	// Abbreviations that are words too ("sat", "sun", "wed") count after
	// last, next or this only.
	weekdayAbbrevs = setOf("mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun")
	months         = setOf("january", "february", "april", "june", "july", "september", "october", "november", "december")
	// Months that are also common words count next to a date word.
	ambiguousMonths  = setOf("march", "may", "august")
	datePrepositions = setOf("in", "of", "since", "until", "early", "late", "mid", "last", "next", "this")
	deictic          = setOf("last", "next", "this", "past", "coming", "previous", "that")
	timeUnits        = setOf("minute", "minutes", "hour", "hours", "day", "days", "week", "weeks", "month", "months", "year", "years", "decade", "decades")
	dayParts         = setOf("night", "morning", "afternoon", "evening")
	seasons          = setOf("spring", "summer", "fall", "autumn", "winter")
	numberWords      = setOf("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "twenty", "thirty")
	quantities       = setOf("a", "an", "few", "several", "couple", "many")
	timeNouns        = setOf("year", "month", "date", "day", "week", "time")
)
