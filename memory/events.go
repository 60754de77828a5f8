package memory

import (
	"context"
	"slices"
)

// EventStreams maps the stream names callers use to the log's names:
// "health" reads the context-health stream.
var EventStreams = map[string]string{
	"compaction": "compaction", "drops": "drops", "recoveries": "recoveries",
	"health": "context-health", "context-health": "context-health", "purges": "purges",
	"edits":        "edits",        // PATCH and DELETE /v1/messages/{id}
	"prompt-cache": "prompt-cache", // the upstream's prompt usage on each gateway answer
}

// Limits of an event query.
const (
	DefaultEventCount = 50
	MaxEventCount     = 1000
)

// EventQuery selects the last N events of a stream, optionally of one session.
type EventQuery struct {
	Stream    string
	SessionID string // "" for every session of the caller
	N         int    // 0: DefaultEventCount
}

// TailEvents returns the caller's last q.N events of q.Stream, oldest first. The
// logs hold every tenant's events; only the caller's are returned.
// EINVALID for an unknown stream, a bad session id or N out of range;
// EUNAVAILABLE when the server keeps no event log.
func (s *Service) TailEvents(ctx context.Context, q EventQuery) ([]map[string]any, error) {
	stream, ok := EventStreams[q.Stream]
	if !ok {
		names := make([]string, 0, len(EventStreams))
		for k := range EventStreams {
			names = append(names, k)
		}
		slices.Sort(names)
		return nil, Errorf(EINVALID, "stream: %q is not one of %v", q.Stream, names)
	}
	if q.SessionID != "" {
		if err := ValidateSessionID(q.SessionID); err != nil {
			return nil, err
		}
	}
	n := q.N
	switch {
	case n == 0:
		n = DefaultEventCount
	case n < 0 || n > MaxEventCount:
		return nil, Errorf(EINVALID, "n: %d is outside 1..%d", n, MaxEventCount)
	}
	if s.EventReader == nil {
		return nil, Errorf(EUNAVAILABLE, "this server keeps no event log")
	}
	tenant := TenantFromContext(ctx)
	events, err := s.EventReader.Tail(stream, n, func(e map[string]any) bool {
		return e["tenant"] == tenant && (q.SessionID == "" || e["session"] == q.SessionID)
	})
	if err != nil {
		return nil, err
	}
	if events == nil {
		events = []map[string]any{}
	}
	return events, nil
}

func (s *Service) event(stream string, ev map[string]any) {
	if s.Events == nil {
		return
	}
	if err := s.Events.Log(stream, ev); err != nil {
		s.Logger.Warn("event log", "stream", stream, "err", err)
	}
}
