package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ctxd/ctxd/memory"
)

// Kinds of inconsistency verify reports.
const (
	FindIndexBehind   = "index_behind" // the index lacks changes of the store's log
	FindColdMissing   = memory.FindColdMissing
	FindColdStale     = memory.FindColdStale
	FindColdTorn      = memory.FindColdTorn
	FindColdBad       = memory.FindColdBad
	FindIndexAhead    = "index_ahead"      // the index has a watermark the store never reached
	FindIndexMissing  = "index_missing"    // a stored message has no document
	FindIndexExtra    = "index_extra"      // a document names no stored message
	FindIndexStale    = "index_stale"      // a document's state or session differs from the store
	FindVectorMissing = "vector_missing"   // a stored message has no vector
	FindVectorDim     = "vector_dim"       // a vector's length is not the data dir's dim
	FindVectorStale   = "vector_stale"     // a vector record's state differs from its message
	FindColdOrphan    = "cold_orphan_file" // a mirror file for a session the store does not have
	FindIndexUnusable = "index_unusable"   // the index cannot be opened (missing, corrupt)
	FindIndexNoAccess = "index_no_access"  // the index may not be read or written (permissions, read-only)
	FindStoreCorrupt  = "store_corrupt"    // the store file's structure is damaged (bbolt's check, a page that cannot be read)
	FindRecordDamaged = "record_damaged"   // a message record fails its checksum or does not decode
	FindSessionCounts = "session_counts"   // a session's message counts by state differ from its messages
)

// Finding is one inconsistency between the store (the truth) and a copy.
type Finding struct {
	Kind      string `json:"kind"`
	Tenant    string `json:"tenant,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	Detail    string `json:"detail"`
}

func (f Finding) String() string {
	where := f.SessionID
	if f.Tenant != "" && f.Tenant != memory.DefaultTenant {
		where = f.Tenant + "/" + where
	}
	if f.MessageID != "" {
		where += " " + f.MessageID
	}
	return fmt.Sprintf("%-16s %s: %s", f.Kind, where, f.Detail)
}

// VerifyReport is what verify found.
type VerifyReport struct {
	Sessions  int       `json:"sessions"`
	Messages  int       `json:"messages"`
	IndexDocs int       `json:"index_docs"`
	Vectors   int       `json:"vectors"`
	ColdFiles int       `json:"cold_files"`
	Findings  []Finding `json:"findings"`
}

// Consistent reports whether nothing was found.
func (r *VerifyReport) Consistent() bool { return len(r.Findings) == 0 }

// Counts is the number of findings of each kind.
func (r *VerifyReport) Counts() map[string]int {
	out := map[string]int{}
	for _, f := range r.Findings {
		out[f.Kind]++
	}
	return out
}

func (r *VerifyReport) add(kind string, m memory.MsgRef, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{Kind: kind, Tenant: m.Tenant, SessionID: m.SessionID, MessageID: m.ID,
		Detail: fmt.Sprintf(format, args...)})
}

type sessionKey struct{ Tenant, ID string }

// storedMsg is what the store holds of a message, for verify.

type storedMsg struct {
	memory.MsgRef
	State    memory.State
	VecDim   int          // -1: no vector
	VecState memory.State // the state the vector record carries
}

// storeScan is the store as verify needs it, in one pass.
type storeScan struct {
	msgs     map[string]*storedMsg
	order    []string                       // ids in store order
	sessions map[sessionKey]bool            // every stored session
	counted  map[sessionKey]memory.Counts   // per session: the counts its record keeps
	recount  map[sessionKey]*memory.Counts  // per session: the counts of its messages' states
	cold     map[sessionKey]map[string]bool // per session: ids that went cold (Cold set)
	coldNow  map[sessionKey]int             // per session: messages in a cold state
	damaged  []*memory.DamagedRecord        // records that could not be read
	bad      map[string]bool                // ids of damaged records, when known
}

func (a *Admin) scanStore(ctx context.Context) (*storeScan, error) {
	sc := &storeScan{msgs: map[string]*storedMsg{}, sessions: map[sessionKey]bool{},
		counted: map[sessionKey]memory.Counts{}, recount: map[sessionKey]*memory.Counts{},
		cold: map[sessionKey]map[string]bool{}, coldNow: map[sessionKey]int{}, bad: map[string]bool{}}
	p := a.progress()
	p.Begin("reading the store", 0)
	defer p.End()
	if err := memory.VisitSessions(ctx, a.Store, func(s *memory.Session) error {
		k := sessionKey{s.Tenant, s.ID}
		sc.sessions[k], sc.counted[k], sc.recount[k] = true, s.Counts, &memory.Counts{}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	err := memory.ScanMessages(ctx, a.Store, func(m *memory.Message) error {
		sm := &storedMsg{MsgRef: memory.MsgRef{ID: m.ID, Tenant: m.Tenant, SessionID: m.SessionID}, State: m.State, VecDim: -1}
		sc.msgs[m.ID] = sm
		sc.order = append(sc.order, m.ID)
		k := sessionKey{m.Tenant, m.SessionID}
		if c := sc.recount[k]; c != nil {
			c.Add(m.State, 1)
		}
		if m.Cold != nil || !m.InWindow() {
			if sc.cold[k] == nil {
				sc.cold[k] = map[string]bool{}
			}
			sc.cold[k][m.ID] = true
		}
		if !m.InWindow() {
			sc.coldNow[k]++
		}
		p.Add(1)
		return nil
	}, func(d *memory.DamagedRecord) {
		sc.damaged = append(sc.damaged, d)
		if d.MessageID != "" {
			sc.bad[d.MessageID] = true
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read messages: %w", err)
	}
	err = a.Store.ForEachVector(ctx, func(v *memory.Message) error {
		if sm := sc.msgs[v.ID]; sm != nil {
			sm.VecDim, sm.VecState = len(v.Vector), v.State
		}
		return nil
	}, nil) // a damaged one leaves its message without a vector: vector_missing
	if err != nil {
		return nil, fmt.Errorf("read vectors: %w", err)
	}
	return sc, nil
}

// Verify compares the store with the full-text index, the vectors and the
// cold mirror, and reports every difference. It changes nothing. Damage to
// the store itself (its file's structure, a record that fails its
// checksum) is reported too, as findings: a store whose pages cannot be
// read is reported without the comparisons that would need them.
func (a *Admin) Verify(ctx context.Context) (*VerifyReport, error) {
	rep := &VerifyReport{}
	if c, ok := a.Store.(memory.StoreChecker); ok {
		if err := c.Check(); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				rep.Findings = append(rep.Findings, Finding{Kind: FindStoreCorrupt, Detail: line})
			}
		}
	}
	sc, err := a.scanStore(ctx)
	if memory.ErrorCode(err) == memory.EDAMAGED {
		rep.Findings = append(rep.Findings, Finding{Kind: FindStoreCorrupt, Detail: err.Error()})
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	rep.Sessions, rep.Messages = len(sc.sessions), len(sc.msgs)
	for _, d := range sc.damaged {
		rep.add(FindRecordDamaged, memory.MsgRef{ID: d.MessageID, Tenant: d.Tenant, SessionID: d.SessionID}, "record at seq %d: %v", d.Seq, d.Err)
	}
	verifyCounts(sc, rep)
	if err := a.verifyVectors(ctx, sc, rep); err != nil {
		return nil, err
	}
	switch {
	case a.IndexErr != nil && errors.Is(a.IndexErr, memory.ErrIndexNoAccess):
		rep.Findings = append(rep.Findings, Finding{Kind: FindIndexNoAccess,
			Detail: fmt.Sprintf("%v; the server cannot start on it, and --repair does not rebuild an index that is not damaged", a.IndexErr)})
	case a.IndexErr != nil:
		rep.Findings = append(rep.Findings, Finding{Kind: FindIndexUnusable,
			Detail: fmt.Sprintf("%v: a server start or --repair rebuilds it from the store", a.IndexErr)})
	}
	if a.Index != nil {
		if err := a.verifyIndex(ctx, sc, rep); err != nil {
			return nil, err
		}
	}
	if a.Cold != nil {
		if err := a.verifyCold(ctx, sc, rep); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// verifyCounts compares each session's counts by state, which its record
// keeps with every write, with its messages' states. The window builder
// trusts them: counts that say nothing is cold would stop it searching
// cold storage, silently. A session with a damaged record is left out:
// its count cannot be checked, and the record is reported.
func verifyCounts(sc *storeScan, rep *VerifyReport) {
	damaged := map[sessionKey]bool{}
	for _, d := range sc.damaged {
		damaged[sessionKey{d.Tenant, d.SessionID}] = true
	}
	keys := make([]sessionKey, 0, len(sc.recount))
	for k := range sc.recount {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b sessionKey) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.ID, b.ID))
	})
	for _, k := range keys {
		if got, want := sc.counted[k], *sc.recount[k]; got != want && !damaged[k] {
			rep.add(FindSessionCounts, memory.MsgRef{Tenant: k.Tenant, SessionID: k.ID},
				"the session record counts %s, its messages are %s", got, want)
		}
	}
}

func (a *Admin) verifyVectors(ctx context.Context, sc *storeScan, rep *VerifyReport) error {
	_, dim, err := a.Model(ctx)
	if err != nil {
		return err
	}
	for _, id := range sc.order {
		m := sc.msgs[id]
		switch {
		case m.VecDim < 0:
			rep.add(FindVectorMissing, m.MsgRef, "message has no vector, or its vector record is damaged")
			continue
		case dim > 0 && m.VecDim != dim:
			rep.add(FindVectorDim, m.MsgRef, "vector has %d dimensions, the data dir's model %d", m.VecDim, dim)
		case m.VecState != m.State:
			rep.add(FindVectorStale, m.MsgRef, "vector record says state %s, the message is %s", m.VecState, m.State)
		}
		rep.Vectors++
	}
	return nil
}

// pendingChanges are the messages and sessions named by changes the index
// has not applied: a start or --repair replays them, so they are reported
// once as the index's lag rather than message by message.
type pendingChanges struct {
	msgs     map[string]bool
	sessions map[sessionKey]bool
}

func (a *Admin) verifyIndex(ctx context.Context, sc *storeScan, rep *VerifyReport) error {
	pend, err := a.indexLag(ctx, rep)
	if err != nil {
		return err
	}
	// A damaged record's document is neither extra nor stale: the record
	// is what is wrong, and it is reported once, as record_damaged.
	skip := func(r memory.MsgRef) bool {
		return pend.msgs[r.ID] || pend.sessions[sessionKey{r.Tenant, r.SessionID}] || sc.bad[r.ID]
	}
	seen := make(map[string]bool, len(sc.msgs))
	p := a.progress()
	p.Begin("reading the index", len(sc.msgs))
	err = a.Docs.ForEachDoc(ctx, func(d memory.IndexDoc) error {
		rep.IndexDocs++
		p.Add(1)
		ref := memory.MsgRef{ID: d.ID, Tenant: d.Tenant, SessionID: d.SessionID}
		m := sc.msgs[d.ID]
		if m != nil {
			seen[d.ID] = true
		}
		switch {
		case skip(ref) || (m != nil && skip(m.MsgRef)):
		case m == nil:
			rep.add(FindIndexExtra, ref, "indexed document names no stored message")
		case d.State != m.State || d.SessionID != m.SessionID || d.Tenant != m.Tenant:
			rep.add(FindIndexStale, m.MsgRef, "index has state %s in %s/%s, the store %s", d.State, d.Tenant, d.SessionID, m.State)
		}
		return nil
	})
	p.End()
	if err != nil {
		return fmt.Errorf("list index documents: %w", err)
	}
	for _, id := range sc.order {
		if m := sc.msgs[id]; !seen[id] && !skip(m.MsgRef) {
			rep.add(FindIndexMissing, m.MsgRef, "stored message (%s) is not in the full-text index", m.State)
		}
	}
	return nil
}

// indexLag reports an index behind or ahead of the store's change log and
// returns what the unapplied changes name.
func (a *Admin) indexLag(ctx context.Context, rep *VerifyReport) (pendingChanges, error) {
	pend := pendingChanges{msgs: map[string]bool{}, sessions: map[sessionKey]bool{}}
	wm, err := a.Index.Watermark()
	if err != nil {
		return pend, fmt.Errorf("read index watermark: %w", err)
	}
	last, err := a.Store.LastSeq(ctx)
	if err != nil {
		return pend, fmt.Errorf("read store seq: %w", err)
	}
	if wm > last {
		rep.Findings = append(rep.Findings, Finding{Kind: FindIndexAhead,
			Detail: fmt.Sprintf("index watermark %d is past the store's last change %d: it was built from another store", wm, last)})
		return pend, nil
	}
	if wm == last {
		return pend, nil
	}
	changes, err := a.Store.Changes(ctx, wm, 0)
	if err != nil {
		return pend, fmt.Errorf("read change log: %w", err)
	}
	if len(changes) == 0 || changes[0].Seq > wm+1 {
		rep.Findings = append(rep.Findings, Finding{Kind: FindIndexBehind,
			Detail: fmt.Sprintf("index is at change %d, the store at %d, and the change log no longer reaches back: rebuild", wm, last)})
		return pend, nil
	}
	for _, c := range changes {
		if c.Op == memory.ChangeDeleteSession {
			pend.sessions[sessionKey{c.Tenant, c.SessionID}] = true
		} else {
			pend.msgs[c.MessageID] = true
		}
	}
	rep.Findings = append(rep.Findings, Finding{Kind: FindIndexBehind,
		Detail: fmt.Sprintf("index is %d changes behind the store (at %d of %d); a server start or --repair replays them", last-wm, wm, last)})
	return pend, nil
}

func (a *Admin) verifyCold(ctx context.Context, sc *storeScan, rep *VerifyReport) error {
	files, err := a.Cold.MirrorSessions()
	if err != nil {
		return fmt.Errorf("list cold mirror: %w", err)
	}
	rep.ColdFiles = len(files)
	check := map[sessionKey]bool{}
	for _, f := range files {
		check[sessionKey(f)] = true
	}
	for k, n := range sc.coldNow {
		if n > 0 {
			check[k] = true
		}
	}
	keys := make([]sessionKey, 0, len(check))
	for k := range check {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y sessionKey) int {
		return cmp.Or(strings.Compare(x.Tenant, y.Tenant), strings.Compare(x.ID, y.ID))
	})
	for _, k := range keys {
		if err := a.verifyColdSession(ctx, sc, k, rep); err != nil {
			return err
		}
	}
	return nil
}

// verifyColdSession compares one session's mirror with the store: every
// message that went cold, in a cold state or recovered, needs a line equal
// to what the store holds (the last line of its id), and a line may only
// name a message that went cold and is still stored.
func (a *Admin) verifyColdSession(ctx context.Context, sc *storeScan, k sessionKey, rep *VerifyReport) error {
	sess := memory.MsgRef{Tenant: k.Tenant, SessionID: k.ID}
	file, err := a.Cold.ReadMirror(k.Tenant, k.ID)
	if err != nil {
		return fmt.Errorf("read cold mirror of %s: %w", k.ID, err)
	}
	if !sc.sessions[k] {
		rep.add(FindColdOrphan, sess, "mirror file of a session the store does not have")
		return nil
	}
	var ids []string
	for id := range sc.cold[k] {
		ids = append(ids, id)
	}
	msgs, err := a.Store.MessagesByID(ctx, k.Tenant, ids, false)
	if err != nil {
		return fmt.Errorf("read cold messages of %s: %w", k.ID, err)
	}
	slices.SortFunc(msgs, func(x, y *memory.Message) int { return cmp.Compare(x.Seq, y.Seq) })
	return memory.CompareMirror(a.Cold, sess, file, msgs, sc.bad, rep.add)
}
