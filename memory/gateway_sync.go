package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Matching the client's history against the session. An agent resends its
// whole history on every call; reading the whole stored session to match
// it made each call cost what the session had grown to (a 1,000-step
// session read 2,000 messages on every call). The gateway keeps, per
// session, what matching needs of the stored messages (ids, roles, call
// ids, a hash of each text) as its own last call left them, with the
// session's version then: a call that finds the session at that version
// matches against it without reading the store. Any other write to the
// session (an edit, a delete through the API) changes the version, and the
// next call reads the store again.

// syncState is what matching needs of one session's stored messages.
type syncState struct {
	version        string
	stored, system []*Message // light copies (see light), in the session's order
	// call is the gateway call (HistoryRepeat.Call) that left this state:
	// its history's messages that are not standing system messages are
	// stored[0:], in order (matched, or stored by it).
	call uint64
}

// maxSyncStates bounds the sessions whose state is kept; when full the
// table starts over (a session then reads its store once).
const maxSyncStates = 4096

type syncCache struct {
	mu     sync.Mutex
	states map[string]*syncState
}

var textSeed = maphash.MakeSeed()

// light is m as matching sees it: its text replaced by a hash (matching
// compares texts for equality only), its metadata by the one key matching
// reads.
func light(m *Message) *Message {
	l := &Message{ID: m.ID, Role: m.Role, ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls,
		Content: strconv.FormatUint(maphash.String(textSeed, m.Content), 36)}
	for _, k := range []string{InstructionsKey, TurnSystemKey} {
		if m.Metadata[k] == true {
			if l.Metadata == nil {
				l.Metadata = map[string]any{}
			}
			l.Metadata[k] = true
		}
	}
	return l
}

// sessionVersion changes with every write to a session: appends move its
// last sequence, deletes and compactions its counts, edits its tokens.
func sessionVersion(s *Session) string {
	return fmt.Sprintf("%d/%+v/%d/%d/%d/%d", s.LastSeq, s.Counts, s.Tokens, s.Compactions, s.Summaries, s.UpdatedAt.UnixNano())
}

func (c *syncCache) get(key, version string) *syncState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.states[key]
	if st == nil || st.version != version {
		return nil
	}
	return st
}

// lastCall answers the call that left the session's state (0: none), at
// any version: that call's history was validated.
func (c *syncCache) lastCall(key string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.states[key]; st != nil {
		return st.call
	}
	return 0
}

func (c *syncCache) put(key string, st *syncState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.states == nil || len(c.states) >= maxSyncStates {
		c.states = map[string]*syncState{}
	}
	c.states[key] = st
}

// moved records the session's new version after a write of the gateway's
// own that changed none of what matching reads (notes, a compaction), or
// appended answer (a light copy, when not nil) to it. A state not at before (another
// write came between) is left as it is: the next call reads the store.
func (c *syncCache) moved(key, before, after string, answer *Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.states[key]
	if st == nil || st.version != before {
		return
	}
	n := &syncState{version: after, stored: st.stored, system: st.system, call: st.call}
	if answer != nil {
		n.stored = append(slices.Clip(st.stored), answer)
	}
	c.states[key] = n
}

// storedForMatching answers the session's stored messages that the client
// sends back (not summaries, versions, superseded messages or the
// gateway's notes), system messages apart, as light copies: from the cache
// when the session is at the version the gateway left it, else read.
func (g *Gateway) storedForMatching(ctx context.Context, tenant, id string) (stored, system []*Message, call uint64, err error) {
	sess, err := g.s.Store.Session(ctx, tenant, id)
	if err != nil && ErrorCode(err) != ENOTFOUND {
		return nil, nil, 0, err
	}
	if sess != nil {
		if st := g.synced.get(tenant+"\x00"+id, sessionVersion(sess)); st != nil {
			return st.stored, st.system, st.call, nil
		}
	}
	all, err := g.s.Store.Messages(ctx, tenant, id, MessageQuery{})
	if err != nil && ErrorCode(err) != ENOTFOUND {
		return nil, nil, 0, err
	}
	for _, m := range all {
		switch {
		case m.IsSummary() || m.IsVersion() || m.IsSuperseded() || IsGatewayNote(m):
			// not the client's: it never sends them back
		case m.IsStandingSystem():
			system = append(system, light(m))
		default:
			stored = append(stored, light(m))
		}
	}
	return stored, system, 0, nil
}

// version answers the session's version now ("" when it cannot be read).
func (g *Gateway) version(ctx context.Context, tenant, id string) string {
	sess, err := g.s.Store.Session(ctx, tenant, id)
	if err != nil {
		return ""
	}
	return sessionVersion(sess)
}

// sync matches the client's history against the session's stored
// originals, supersedes what the history no longer has, and stores the rest
// of the history. It answers, for each stored message the history holds,
// its index in the history.
//
// System messages are matched as a set, the others (and a turn's system
// messages, TurnSystemKey) in order: an agent that rewrites its system
// prompt on every call (a date, a tool list) replaces the stored prompt,
// not the conversation after it.
func (g *Gateway) sync(ctx context.Context, tenant string, req GatewayRequest, out *GatewayWindow) (map[string]int, error) {
	stored, storedSys, last, err := g.storedForMatching(ctx, tenant, req.Session)
	if err != nil {
		return nil, err
	}
	// The part of the history the session's last call sent too is that
	// call's: its messages (not standing system messages, matched as a set
	// below) are stored[0:] in order, and are not hashed or matched again.
	known := 0 // the first known of sent are repeated
	if req.After == "" && last != 0 && req.Repeat.Of == last && req.Repeat.N <= len(stored) {
		known = req.Repeat.N
	}
	history := make([]*Message, len(req.History)) // as matching sees them; nil: repeated
	var sent, sentSys []int                       // indexes in the history
	for i, m := range req.History {
		standing := m.IsStandingSystem()
		if standing || len(sent) >= known {
			history[i] = light(m)
		}
		if standing {
			sentSys = append(sentSys, i)
		} else {
			sent = append(sent, i)
		}
	}
	client := map[string]int{}
	var stale []*Message
	var fresh []int
	used := make([]bool, len(storedSys))
	for _, i := range sentSys {
		j := -1
		for x, m := range storedSys {
			if !used[x] && sameTurn(m, history[i]) {
				j = x
				break
			}
		}
		if j < 0 {
			fresh = append(fresh, i)
			continue
		}
		used[j] = true
		client[storedSys[j].ID] = i
	}
	for j, m := range storedSys {
		// A continuation sends only its new input: the stored system
		// messages stay, but for the instructions it replaces.
		if !used[j] && (req.After == "" || m.Metadata[InstructionsKey] == true) {
			stale = append(stale, m)
		}
	}
	var keep int // the stored messages that stay the client's
	if req.After != "" {
		at := slices.IndexFunc(stored, func(m *Message) bool { return m.ID == req.After })
		if at < 0 {
			return nil, Errorf(ENOTFOUND, "the answer %s this call continues is no longer in the session", req.After)
		}
		stale = append(stale, stored[at+1:]...)
		fresh = append(fresh, sent...)
		keep = at + 1
	} else {
		k := known
		for j := range k {
			client[stored[j].ID] = sent[j]
		}
		for k < len(stored) && k < len(sent) && (sameTurn(stored[k], history[sent[k]]) ||
			k < len(sent)-1 && g.slightlyEdited(ctx, stored[k], req.History[sent[k]])) {
			client[stored[k].ID] = sent[k]
			k++
		}
		stale = append(stale, stored[k:]...)
		fresh = append(fresh, sent[k:]...)
		keep = k
	}
	// What matching will read on the next call, once this one's writes
	// are done: the kept messages, then the fresh ones.
	next := &syncState{stored: slices.Clip(stored[:keep]), call: req.Repeat.Call}
	out.Matched = len(req.History) - known
	for _, m := range storedSys {
		if !slices.Contains(stale, m) {
			next.system = append(next.system, m)
		}
	}
	slices.Sort(fresh) // stored in the history's order
	if len(stale) > 0 {
		ids, err := g.supersede(ctx, tenant, req.Session, stale)
		if err != nil {
			return nil, err
		}
		out.Superseded = ids
	}
	for len(fresh) > 0 {
		n := min(len(fresh), g.s.Limits.MaxMessagesPerCall)
		batch := make([]*Message, n)
		for j, i := range fresh[:n] {
			batch[j] = storedCopy(req.History[i])
		}
		res, err := g.s.Append(ctx, req.Session, batch)
		if err != nil {
			return nil, err
		}
		for j, id := range res.IDs {
			client[id] = fresh[j]
			l := history[fresh[j]]
			l.ID = id
			if l.IsStandingSystem() {
				next.system = append(next.system, l)
			} else {
				next.stored = append(next.stored, l)
			}
		}
		out.Stored += n
		out.Compacted = out.Compacted || res.Compaction != nil
		out.FlushDue = out.FlushDue || (res.Session != nil && res.Session.FlushPrompt != "" && !res.Session.notesFull())
		fresh = fresh[n:]
	}
	if next.version = g.version(ctx, tenant, req.Session); next.version != "" {
		g.synced.put(tenant+"\x00"+req.Session, next)
		out.syncedAt = next.version
	}
	return client, nil
}

// storedCopy is a copy of a client message for Append, which sets its id,
// state, counts and vector: the request's History stays as the adapter
// gave it, and an adapter may give the same messages to its next calls
// (an agent resends its history; decoding it again on every call made each
// call cost what the session had grown to).
func storedCopy(m *Message) *Message {
	c := *m
	c.ToolCalls = slices.Clone(m.ToolCalls)
	c.Metadata = maps.Clone(m.Metadata)
	return &c
}

// sameTurn reports whether a resent client message is the stored one:
// same role, text, tool call id and tool calls; a tool result, same call id. Names and metadata are not
// compared (SDKs drop or add them between calls). An assistant turn with
// tool calls is the stored one when its calls have the same ids and names,
// in any order: a call id names one call, and clients rewrite their own
// turns (Claude Code drops "cd <cwd> &&" from Bash inputs, some reorder
// text and calls), which must not make ctxd store the history again.
func sameTurn(stored, sent *Message) bool {
	if stored.Role != sent.Role || stored.ToolCallID != sent.ToolCallID || len(stored.ToolCalls) != len(sent.ToolCalls) {
		return false
	}
	if stored.Role == RoleTool && stored.ToolCallID != "" {
		// A result is the one its call id names: clients clear or trim
		// their old tool outputs (opencode with a context limit replaces
		// them with a placeholder), which must not make ctxd store the
		// history from there again. ctxd keeps the original.
		return true
	}
	if len(stored.ToolCalls) > 0 && stored.ToolCalls[0].ID != "" {
		ids := map[string]string{}
		for _, tc := range stored.ToolCalls {
			ids[tc.ID] = tc.Function.Name
		}
		for _, tc := range sent.ToolCalls {
			if name, ok := ids[tc.ID]; !ok || name != tc.Function.Name {
				return false
			}
			delete(ids, tc.ID)
		}
		return true
	}
	if stored.Content != sent.Content {
		return false
	}
	for i, tc := range stored.ToolCalls {
		o := sent.ToolCalls[i]
		if tc.ID != o.ID || tc.Function.Name != o.Function.Name || strings.TrimSpace(tc.Function.Arguments) != strings.TrimSpace(o.Function.Arguments) {
			return false
		}
	}
	return true
}

// maxEditShare is the most of a message's text a client may have changed
// in place for the message to stay the stored one (slightlyEdited).
const maxEditShare = 0.05

// slightlyEdited reports whether sent is the stored message with a small
// change in place (a reminder's date, a path it shortened): clients rewrite
// their own earlier messages, and taking each such change for a new
// history made ctxd supersede and store everything after it again. Only an
// earlier message counts (the newest, edited, is the user's new question),
// of the same role and tool calls, with at most maxEditShare of its text
// changed. The stored original stays, and is what the window sends.
func (g *Gateway) slightlyEdited(ctx context.Context, stored, sent *Message) bool {
	if stored.Role != sent.Role || stored.ToolCallID != sent.ToolCallID || len(stored.ToolCalls) != len(sent.ToolCalls) {
		return false
	}
	for i, tc := range stored.ToolCalls {
		if tc.ID != sent.ToolCalls[i].ID || tc.Function.Name != sent.ToolCalls[i].Function.Name {
			return false
		}
	}
	orig, err := g.s.Message(ctx, stored.ID)
	if err != nil {
		return false
	}
	return nearlySame(orig.Content, sent.Content)
}

// nearlySame reports whether b is a with one changed stretch of at most
// maxEditShare of the longer text.
func nearlySame(a, b string) bool {
	n := max(len(a), len(b))
	if n == 0 {
		return true
	}
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	q := 0
	for q < len(a)-p && q < len(b)-p && a[len(a)-1-q] == b[len(b)-1-q] {
		q++
	}
	return float64(n-p-q) <= maxEditShare*float64(n)
}
