package memory

import (
	"context"
	"encoding/json"
)

// With several nodes and no session affinity, a session's calls go to any
// node: a layout kept in one node's memory let the next call, on another
// node, build the window afresh, and the provider's cached prefix was lost
// on every move. On a store the nodes share, the layout of a session's
// last window is kept in the store (LayoutStore) and read by whichever node
// builds the next: the same calls give the same windows as on one node.
// It costs a read and a write of one row a window. A layout read from the
// store is checked as one kept in memory is (every original it shows read
// again, edits and compactions rebuild it), so one another node left stale
// is never shown.

// layoutJSON is a layoutEntry as the store keeps it.
type layoutJSON struct {
	Keys     []uint64        `json:"keys"`
	Loop     *loopLayoutJSON `json:"loop,omitempty"`
	ChatFrom uint64          `json:"chat_from,omitempty"`
	ChatMax  int             `json:"chat_max,omitempty"`
}

type loopLayoutJSON struct {
	MaxTokens int             `json:"max_tokens"`
	Msgs      []layoutMsgJSON `json:"msgs"`
	CurStart  int             `json:"cur_start"`
	LastSeq   uint64          `json:"last_seq"`
	Pinned    string          `json:"pinned"`
}

type layoutMsgJSON struct {
	ID      string   `json:"id"`
	Source  string   `json:"source"`
	Level   int      `json:"level"`
	Tokens  int      `json:"tokens"`
	Hash    uint64   `json:"hash"`
	Orig    uint64   `json:"orig"`
	Written *Message `json:"written,omitempty"`
}

func encodeLayout(e *layoutEntry) ([]byte, error) {
	out := layoutJSON{Keys: e.keys, ChatFrom: e.chatFrom, ChatMax: e.chatMax}
	if l := e.layout; l != nil {
		lj := &loopLayoutJSON{MaxTokens: l.maxTokens, CurStart: l.curStart, LastSeq: l.lastSeq, Pinned: l.pinned}
		for _, m := range l.msgs {
			lj.Msgs = append(lj.Msgs, layoutMsgJSON{ID: m.id, Source: m.source, Level: m.level, Tokens: m.tokens, Hash: m.hash, Orig: m.orig, Written: m.written})
		}
		out.Loop = lj
	}
	return json.Marshal(out)
}

func decodeLayout(tenant, session string, b []byte) (*layoutEntry, error) {
	var in layoutJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	e := &layoutEntry{keys: in.Keys, chatFrom: in.ChatFrom, chatMax: in.ChatMax}
	if lj := in.Loop; lj != nil {
		l := &loopLayout{maxTokens: lj.MaxTokens, curStart: lj.CurStart, lastSeq: lj.LastSeq, pinned: lj.Pinned}
		for _, m := range lj.Msgs {
			if m.Written != nil {
				m.Written.Tenant, m.Written.SessionID = tenant, session
			}
			l.msgs = append(l.msgs, layoutMsg{id: m.ID, source: m.Source, level: m.Level, tokens: m.Tokens, hash: m.Hash, orig: m.Orig, written: m.Written})
		}
		e.layout = l
	}
	return e, nil
}

// sharedLayouts is the store's LayoutStore when other nodes share it.
func (s *Service) sharedLayouts() LayoutStore {
	if !s.SharedStore {
		return nil
	}
	ls, _ := s.Store.(LayoutStore)
	return ls
}

// layout is the session's last window: from the store when nodes share
// it, else from memory. A layout that cannot be read is none: the window
// is built afresh.
func (s *Service) layout(ctx context.Context, tenant, session string) *layoutEntry {
	ls := s.sharedLayouts()
	if ls == nil {
		return s.layouts.get(layoutKey(tenant, session))
	}
	b, err := ls.Layout(ctx, tenant, session)
	if err != nil || b == nil {
		if err != nil {
			s.Logger.Warn("read the session's last window layout; building afresh", "session", session, "err", err)
		}
		return nil
	}
	e, err := decodeLayout(tenant, session, b)
	if err != nil {
		s.Logger.Warn("the session's stored window layout does not decode; building afresh", "session", session, "err", err)
		return nil
	}
	return e
}

// putLayout keeps e as the session's last window. A failed write is
// logged: the next window is then built afresh, nothing worse.
func (s *Service) putLayout(ctx context.Context, tenant, session string, e *layoutEntry) {
	ls := s.sharedLayouts()
	if ls == nil {
		s.layouts.put(layoutKey(tenant, session), e)
		return
	}
	b, err := encodeLayout(e)
	if err == nil {
		err = ls.PutLayout(ctx, tenant, session, b)
	}
	if err != nil {
		s.Logger.Warn("keep the session's window layout", "session", session, "err", err)
	}
}
