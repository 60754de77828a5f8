package ui

import (
	"testing"
	"time"
)

// Logins expire after loginLifetime, and the table stays bounded.
func TestLoginsExpireAndStayBounded(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := newLogins(func() time.Time { return now })
	first, err := l.open("k1")
	if err != nil || l.key(first) != "k1" {
		t.Fatalf("open: %q %v", l.key(first), err)
	}
	now = now.Add(loginLifetime - time.Second)
	if l.key(first) != "k1" {
		t.Fatal("a login ended before its lifetime")
	}
	now = now.Add(time.Second)
	if l.key(first) != "" {
		t.Fatal("a login outlived its lifetime")
	}
	for range maxLogins + 10 {
		if _, err := l.open("k2"); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.byHash) > maxLogins {
		t.Fatalf("%d logins kept, over %d", len(l.byHash), maxLogins)
	}
}
