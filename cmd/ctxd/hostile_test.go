package main

import (
	"strings"
	"testing"
)

// TestHostileInput sends every row of the hostile tables to a real server
// holding two seeded sessions (one compacted, so every state is present) and
// checks each answer's status, error code and shape, and that nothing a
// client can see changed. validation_test.go holds the first, smaller table.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("hundreds of requests")
	}
	ts := startServer(t, t.TempDir())
	seed := seedHostile(t, ts)
	before := ts.stableSnapshot(t)

	var cases []hostileCase
	cases = append(cases, fieldCases()...)
	cases = append(cases, idCases(seed)...)
	cases = append(cases, messageIDCases(seed)...)
	cases = append(cases, queryCases()...)
	cases = append(cases, structureCases()...)
	t.Logf("%d hostile requests", len(cases))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A row that changes data is reported once; the next rows are
			// judged against the store as it now is.
			defer func() {
				if t.Failed() {
					before = ts.fullSnapshot(t)
				}
			}()
			r := hostileDo(t, ts, c.method, c.path, c.body, nil)
			if r.Status != c.status {
				t.Fatalf("%s %.120s = %d, want %d: %.300s", c.method, c.path, r.Status, c.status, r.Raw)
			}
			if c.code != "" {
				message := checkErrorShape(t, r)
				if r.errCode() != c.code {
					t.Fatalf("code %q, want %q: %.300s", r.errCode(), c.code, r.Raw)
				}
				if !strings.Contains(message, c.mention) {
					t.Fatalf("message %q does not mention %q", message, c.mention)
				}
			}
			if after := ts.fullSnapshot(t); after != before {
				t.Fatalf("the request changed what the store shows:\nbefore %.2000s\nafter  %.2000s", before, after)
			}
		})
	}
}
