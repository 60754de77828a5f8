package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
	"github.com/ctxd/ctxd/memory/pgstore"
	"github.com/labstack/echo/v4/middleware"
)

// SharedStore reports whether --store names a database that several nodes
// share (PostgreSQL) rather than the embedded store of the data dir.
func SharedStore(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// OpenStore opens the store cfg names: the data dir's bbolt file, with its
// checks for a lost store and its disk reserve, or a PostgreSQL database,
// migrated to this binary's schema.
func (m *Main) openStore(ctx context.Context) (_ memory.Store, empty bool, err error) {
	cfg := m.Config
	if SharedStore(cfg.Store) {
		st, err := pgstore.Open(ctx, cfg.Store, pgstore.Options{})
		if err != nil {
			return nil, false, err // not a nil *pgstore.Store in a non-nil interface: Close would call it
		}
		return st, false, nil
	}
	if cfg.Store != "" {
		return nil, false, memory.Errorf(memory.EINVALID, "--store: %q is neither empty (the data dir's store) nor a postgres:// URL", cfg.Store)
	}
	empty, err = storeFileEmpty(cfg.DataDir)
	if err != nil {
		return nil, false, err
	}
	if empty { // checked before opening, which would write a new store
		if err := refuseLostStore(m.Logger, cfg.DataDir, cfg.AllowEmptyStore); err != nil {
			return nil, false, err
		}
	}
	st, err := boltstore.Open(StorePath(cfg.DataDir), false)
	if err != nil {
		return nil, false, err
	}
	st.SetDecodeCacheBytes(cfg.DecodeCacheBytes)
	if !empty {
		// A new store a start before this one wrote in place of the lost one.
		if empty, err = storeIsNew(ctx, st); err != nil {
			st.Close()
			return nil, false, err
		}
		if empty {
			if err := refuseLostStore(m.Logger, cfg.DataDir, cfg.AllowEmptyStore); err != nil {
				st.Close()
				return nil, false, err
			}
		}
	}
	if err := st.ReserveDisk(cfg.DiskReserve, cfg.DiskReservePct); err != nil {
		st.Close()
		return nil, false, err
	}
	if err := st.KeepSpare(cfg.DiskSpare); err != nil {
		// Not fatal: on a full disk the server must start so that sessions
		// can be deleted; the spare is filled once there is room.
		m.Logger.Warn("the store's spare file for deletes on a full disk is not whole", "err", err)
	}
	return st, empty, nil
}

// sharedLimiter keeps the rate limits in the database when the store is
// one several nodes share (nil: in the node's memory).
func sharedLimiter(st memory.Store, cfg Config) middleware.RateLimiterStore {
	if pg, ok := st.(*pgstore.Store); ok && cfg.RateLimit > 0 {
		l := pg.RateLimiter(cfg.RateLimit, cfg.RateBurst)
		// A key's bucket is its tenant's, so that a distributed database
		// keeps it on the tenant's shard; client addresses have none.
		tenants := make(map[string]string, len(cfg.Keys))
		for _, k := range cfg.Keys {
			tenants[k.Identity()] = k.Tenant
		}
		l.Tenant = func(identity string) string { return tenants[identity] }
		return l
	}
	return nil
}

// storeName is the store for logs, without a password.
func storeName(cfg Config) string {
	if !SharedStore(cfg.Store) {
		return "bbolt:" + StorePath(cfg.DataDir)
	}
	if i, j := strings.Index(cfg.Store, "://"), strings.LastIndex(cfg.Store, "@"); i >= 0 && j > i {
		return cfg.Store[:i+3] + "***" + cfg.Store[j:]
	}
	return fmt.Sprintf("%.40s", cfg.Store)
}
