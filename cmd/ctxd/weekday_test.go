package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/internal/server/servertest"
)

// The suite passes whatever the day: a server whose clock reads each day of
// one week, at an hour of the morning, the afternoon and the night, finds in
// text mode only what its messages say, never the words of the day they were
// written (a test that searched for "Friday" failed every Friday), and the
// edit scenario that once did so passes on each of them.
func TestEveryWeekday(t *testing.T) {
	monday := time.Date(2026, time.March, 2, 0, 0, 0, 0, time.UTC)
	for d := range 7 {
		for _, hour := range []int{8, 15, 23} {
			start := monday.AddDate(0, 0, d).Add(time.Duration(hour) * time.Hour)
			t.Run(fmt.Sprintf("%s-%02dh", start.Weekday(), hour), func(t *testing.T) {
				t.Parallel()
				ts := startServer(t, t.TempDir(), func(c *server.Config) { c.Clock = servertest.Clock(start) })
				said := ts.store("w", msg("user", "The release train leaves every Friday."),
					msg("assistant", "Noted: the deploy window is the morning."))
				for _, word := range []string{strings.ToLower(start.Weekday().String()), strings.ToLower(start.Month().String()),
					fmt.Sprint(start.Day()), fmt.Sprint(start.Year()), "afternoon", "night", "friday", "morning"} {
					got := idsOf(textSearch(ts, "w", word))
					var want []string
					switch word {
					case "friday":
						want = said[:1]
					case "morning":
						want = said[1:]
					}
					if strings.Join(got, ",") != strings.Join(want, ",") {
						t.Errorf("text search %q on %v: %v, want %v", word, start, got, want)
					}
				}
			})
		}
	}
}
