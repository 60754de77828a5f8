package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ctxd/ctxd/internal/clip"
	"github.com/ctxd/ctxd/memory"
)

// Events is the event log in the database, for nodes that share it: every
// node's events in one place, read back whole by any (memory.EventLog and
// memory.EventReader, as the eventlog package's files are for one process).
// Events are written as the files' lines are: strings clipped to
// MaxString, the log's own "time".
type Events struct {
	s   *Store
	now func() time.Time
	// MaxString bounds an event's string fields (eventlog's default).
	MaxString int
	// Keep is how many of a tenant's newest events of a stream are kept.
	Keep   int64
	logged atomic.Int64
}

// Defaults of Events.
const (
	DefaultEventMaxString = 160
	DefaultKeepEvents     = 100_000
)

var (
	_ memory.EventLog    = (*Events)(nil)
	_ memory.EventReader = (*Events)(nil)
)

// Events returns the store's event log on clock now (nil: time.Now).
func (s *Store) Events(now func() time.Time) *Events {
	if now == nil {
		now = time.Now
	}
	return &Events{s: s, now: now, MaxString: DefaultEventMaxString, Keep: DefaultKeepEvents}
}

// trimEvery is how many events a node logs between two trims of a stream.
const trimEvery = 1000

// Log appends one event to a stream.
func (e *Events) Log(stream string, event map[string]any) error {
	ev := make(map[string]any, len(event)+1)
	for k, v := range event {
		if s, ok := v.(string); ok {
			v = clip.String(s, e.MaxString)
		}
		ev[k] = v
	}
	ev["time"] = e.now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("log %s event: %w", stream, err)
	}
	tenant, _ := ev["tenant"].(string)
	ctx := context.Background()
	if _, err := e.s.pool.Exec(ctx, `INSERT INTO events (tenant, stream, body) VALUES ($1, $2, $3)`, tenant, stream, b); err != nil {
		return dbErr(err)
	}
	if e.logged.Add(1)%trimEvery == 0 {
		_, err = e.s.pool.Exec(ctx, `DELETE FROM events WHERE tenant = $1 AND stream = $2 AND id <= (SELECT max(id) FROM events WHERE tenant = $1 AND stream = $2) - $3`, tenant, stream, e.Keep)
	}
	return dbErr(err)
}

// tailPage is how many events Tail reads at a time, newest first.
const tailPage = 500

// Tail returns the last n events of a stream that filter keeps, oldest
// first (n <= 0: all of them).
func (e *Events) Tail(stream string, n int, filter func(map[string]any) bool) ([]map[string]any, error) {
	ctx := context.Background()
	var out []map[string]any
	before := int64(-1)
	for {
		rows, err := e.s.pool.Query(ctx, `/* all tenants: the log is read whole, as a node's files are */ SELECT id, body FROM events WHERE stream = $1 AND ($2 < 0 OR id < $2) ORDER BY id DESC LIMIT `+fmt.Sprint(tailPage), stream, before)
		if err != nil {
			return nil, dbErr(err)
		}
		read := 0
		for rows.Next() {
			var body []byte
			if err := rows.Scan(&before, &body); err != nil {
				rows.Close()
				return nil, dbErr(err)
			}
			read++
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.UseNumber() // as the file log reads numbers back
			var ev map[string]any
			if dec.Decode(&ev) != nil || (filter != nil && !filter(ev)) {
				continue
			}
			if out = append(out, ev); n > 0 && len(out) >= n {
				break
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, dbErr(err)
		}
		if read < tailPage || (n > 0 && len(out) >= n) {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}
