package pgstore

import (
	"context"
	"sync/atomic"
	"time"
)

// RateLimiter is a token bucket per caller in the database, so that a
// limit holds for the nodes together rather than for each: behind a load
// balancer each node's own buckets would let a caller through as many
// times over as there are nodes. The database's clock refills the
// buckets, so the nodes' clocks need not agree.
type RateLimiter struct {
	s *Store
	// Tenant names the tenant a caller's bucket belongs to; nil, or ""
	// (a client address, without a key), is the store-wide tenant.
	Tenant func(identity string) string
	rate   float64 // tokens a second
	burst  float64
	calls  atomic.Uint64
}

// RateLimiter returns a limiter of rate requests a second with bursts of
// burst, on the store's database.
func (s *Store) RateLimiter(rate float64, burst int) *RateLimiter {
	return &RateLimiter{s: s, rate: rate, burst: float64(max(burst, 1))}
}

// rateSQL refills the caller's bucket for the time since its last request
// ($2 a second, up to $3), takes one token when there is one and says
// whether it did: one statement, the row locked for its length only (SET
// reads the row as it was).
const rateSQL = `INSERT INTO rate_limits AS r (tenant, identity, tokens, at, allowed) VALUES ($4, $1, $3::float8 - 1, clock_timestamp(), true)
	ON CONFLICT (tenant, identity) DO UPDATE SET
		allowed = least($3::float8, r.tokens + extract(epoch FROM clock_timestamp() - r.at)::float8 * $2::float8) >= 1,
		tokens = least($3::float8, r.tokens + extract(epoch FROM clock_timestamp() - r.at)::float8 * $2::float8)
			- CASE WHEN least($3::float8, r.tokens + extract(epoch FROM clock_timestamp() - r.at)::float8 * $2::float8) >= 1 THEN 1 ELSE 0 END,
		at = clock_timestamp()
	RETURNING allowed`

// expireEvery is how many requests go between deletions of the buckets
// that have refilled (a deleted bucket is a full one).
const expireEvery = 1000

// Allow takes one request from identity's bucket. A database it cannot
// reach lets the request through: the request then fails on the store
// with a 503 of its own, which says more than a 429 would.
func (l *RateLimiter) Allow(identity string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l.calls.Add(1)%expireEvery == 0 {
		_, _ = l.s.pool.Exec(ctx, `/* all tenants: expiry */ DELETE FROM rate_limits WHERE at < clock_timestamp() - make_interval(secs => $1)`, l.burst/l.rate)
	}
	tenant := storeWide
	if l.Tenant != nil {
		tenant = l.Tenant(identity)
	}
	var ok bool
	if err := l.s.pool.QueryRow(ctx, rateSQL, identity, l.rate, l.burst, tenant).Scan(&ok); err != nil {
		return true, nil
	}
	return ok, nil
}
