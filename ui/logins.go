package ui

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// logins are the dashboard's logged-in browsers. The cookie holds a random
// token, never the API key: a cookie that leaks (a shared machine, a
// backup of the browser's profile) is worth nothing once its owner logs
// out, or after loginLifetime, and logging out revokes it on the server
// rather than only asking the browser to forget it. They live in memory: a
// restart logs everyone out, which a session cookie allows anyway.
type logins struct {
	mu  sync.Mutex
	now func() time.Time
	// by the token's SHA-256: a lookup's timing says nothing of the token
	byHash map[[sha256.Size]byte]login
}

type login struct {
	key     string
	expires time.Time
}

const (
	// loginLifetime is how long a login lasts, used or not: a working day.
	loginLifetime = 12 * time.Hour
	// maxLogins bounds the table: only a valid key logs in, but a script
	// holding one could log in without end. Past it the login that expires
	// first goes.
	maxLogins = 10000
)

func newLogins(now func() time.Time) *logins {
	return &logins{now: now, byHash: map[[sha256.Size]byte]login{}}
}

// open records a login with key and returns its token, for the cookie.
func (l *logins) open(key string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.byHash) >= maxLogins {
		l.evict(now)
	}
	l.byHash[sha256.Sum256([]byte(token))] = login{key: key, expires: now.Add(loginLifetime)}
	return token, nil
}

// key is the API key of a live login ("" for a token unknown, revoked or
// expired).
func (l *logins) key(token string) string {
	if token == "" {
		return ""
	}
	h := sha256.Sum256([]byte(token))
	l.mu.Lock()
	defer l.mu.Unlock()
	in, ok := l.byHash[h]
	if !ok {
		return ""
	}
	if !l.now().Before(in.expires) {
		delete(l.byHash, h)
		return ""
	}
	return in.key
}

// close revokes a login.
func (l *logins) close(token string) {
	h := sha256.Sum256([]byte(token))
	l.mu.Lock()
	delete(l.byHash, h)
	l.mu.Unlock()
}

// evict drops the expired logins, or, with none, the one expiring first.
func (l *logins) evict(now time.Time) {
	var first [sha256.Size]byte
	var firstAt time.Time
	for h, in := range l.byHash {
		if !now.Before(in.expires) {
			delete(l.byHash, h)
			continue
		}
		if firstAt.IsZero() || in.expires.Before(firstAt) {
			first, firstAt = h, in.expires
		}
	}
	if len(l.byHash) >= maxLogins {
		delete(l.byHash, first)
	}
}
