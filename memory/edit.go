package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ReasonEdited is the drop reason of an earlier version of an edited
// message (KindVersion).
const ReasonEdited = "edited"

// MessageEdit is a change to a stored message (PATCH /v1/messages/{id}):
// nil fields stay as they are.
type MessageEdit struct {
	Content   *string
	Pinned    *bool
	Important *bool
	// Metadata replaces the message's metadata when SetMetadata is true
	// (nil or empty clears it).
	Metadata    map[string]any
	SetMetadata bool
}

// EditResult is an edited message and what the edit did.
type EditResult struct {
	Message *Message
	// Previous is the earlier version kept cold when the content changed.
	Previous *Message
	// Changed names the fields that changed; none: the edit changed nothing.
	Changed []string
}

// EditMessage changes one of the caller's messages, in one transaction
// that keeps the session's totals exact. When the content changes, the
// message is counted and embedded again and its previous version is kept
// cold (drop reason "edited", recoverable for the session's
// recoverable_for_days) and listed in the message's Versions, so it stays
// searchable and can be read back. The message keeps its id, place and
// state. EINVALID for an empty edit or bad values; ENOTFOUND for an id the
// caller does not have; ECONFLICT for an earlier version, a summary's
// content, pinning a cold message, or a pinned budget the edit would pass.
func (s *Service) EditMessage(ctx context.Context, id string, e MessageEdit) (*EditResult, error) {
	if e.Content == nil && e.Pinned == nil && e.Important == nil && !e.SetMetadata {
		return nil, Errorf(EINVALID, "nothing to change: send one or more of content, pinned, important, metadata")
	}
	if e.SetMetadata {
		if err := checkMetadata(e.Metadata, s.Limits); err != nil {
			return nil, err
		}
	}
	m, err := s.Message(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := editable(m, e, s.Limits); err != nil {
		return nil, err
	}
	tenant := TenantFromContext(ctx)
	// One edit at a time per session, and none in the middle of a
	// compaction or recovery of it.
	unlock := s.lockSession(ctx, tenant, m.SessionID)
	defer unlock()
	sess, err := s.Store.Session(ctx, tenant, m.SessionID)
	if err != nil {
		return nil, err
	}
	pol := s.policy(sess)
	var content *Message // the new content, counted and embedded
	if e.Content != nil && *e.Content != m.Content {
		if content, err = s.prepareContent(ctx, sess.Encoding, sess.ContextWindow, pol, m, *e.Content); err != nil {
			return nil, err
		}
	}
	now := s.Now().UTC()
	res := &EditResult{}
	var wentCold bool
	tokensBefore := 0
	_, err = s.Store.Update(ctx, tenant, m.SessionID, func(tx SessionTx) error {
		res.Previous, res.Changed = nil, nil
		cur, err := tx.Message(id)
		if err != nil {
			return err
		}
		next, changed := applyEdit(cur, e, content)
		res.Message, res.Changed, wentCold, tokensBefore = next, changed, cur.Cold != nil, cur.Tokens
		if len(changed) == 0 {
			return nil
		}
		if err := s.checkPinned(tx, PinnedCost(next)-PinnedCost(cur)); err != nil {
			return err
		}
		if next.Content != cur.Content {
			res.Previous = s.versionOf(cur, pol, now)
			if err := appendVersion(tx, res.Previous, cur.Turn); err != nil {
				return err
			}
			next.Versions = append(slices.Clone(cur.Versions), res.Previous.ID)
		}
		tx.Session().UpdatedAt = now
		return tx.Put(next)
	})
	if err != nil {
		return nil, err
	}
	if len(res.Changed) == 0 {
		return res, nil
	}
	s.syncIndex(ctx)
	s.mirrorEdit(ctx, tenant, m.SessionID, res, wentCold)
	ev := map[string]any{"tenant": tenant, "session": m.SessionID, "message": id, "op": "edit", "changed": res.Changed,
		"tokens_before": tokensBefore, "tokens_after": res.Message.Tokens, "pinned": res.Message.Pinned, "at": now}
	if res.Previous != nil {
		ev["previous_version"] = res.Previous.ID
	}
	s.event("edits", ev)
	return res, nil
}

// editable refuses edits that cannot apply to m, before anything is
// counted or embedded.
func editable(m *Message, e MessageEdit, lim Limits) error {
	switch {
	case m.IsVersion():
		return Errorf(ECONFLICT, "message %s is an earlier version of message %s, kept as it was: edit %s instead", m.ID, m.VersionOf, m.VersionOf)
	case m.IsSummary() && e.Content != nil:
		return Errorf(ECONFLICT, "message %s is a summary the server wrote: its content cannot be edited; delete it (DELETE /v1/messages/%s; its sources stay cold and recoverable) and store a note of your own", m.ID, m.ID)
	case e.Pinned != nil && *e.Pinned && !m.Pinned && !m.InWindow():
		return Errorf(ECONFLICT, "message %s is %s (out of the working window): recover it first (POST /v1/sessions/%s/messages/%s/recover), then pin it", m.ID, m.State, m.SessionID, m.ID)
	}
	if e.Content != nil {
		view := *m
		view.Content = *e.Content
		if err := checkContent(&view, lim); err != nil {
			return err
		}
	}
	return nil
}

// prepareContent counts and embeds m with new content, as a write would
// (tokens, pruned costs of a long tool result, vector): a message's role,
// name and tool fields never change, so this is its exact new cost.
func (s *Service) prepareContent(ctx context.Context, enc string, window int, pol Policy, m *Message, content string) (*Message, error) {
	view := *m
	view.Content = content
	n, err := MessageTokens(s.Tokenizer, enc, &view)
	if err != nil {
		return nil, err
	}
	view.Tokens = n
	// An edited message is one message: it may take its whole share.
	if view.Prune, err = pol.pruneCosts(s.Tokenizer, enc, &view, int(pol.ToolResultMaxPct*float64(window))); err != nil {
		return nil, err
	}
	vecs, err := s.embed(ctx, []string{EmbedText(&view)})
	if err != nil {
		return nil, fmt.Errorf("embed edited message %s: %w", m.ID, err)
	}
	if len(vecs) != 1 {
		return nil, fmt.Errorf("embedder returned %d vectors for 1 text", len(vecs))
	}
	view.Vector = vecs[0]
	return &view, nil
}

// applyEdit returns cur with the edit applied (content: the prepared new
// content, or nil when it does not change) and the names of the fields
// that changed.
func applyEdit(cur *Message, e MessageEdit, content *Message) (*Message, []string) {
	next := *cur
	var changed []string
	if content != nil && content.Content != cur.Content {
		next.Content, next.Tokens, next.Prune, next.Vector = content.Content, content.Tokens, content.Prune, content.Vector
		changed = append(changed, "content")
	}
	if e.Pinned != nil && *e.Pinned != cur.Pinned {
		next.Pinned = *e.Pinned
		changed = append(changed, "pinned")
	}
	if e.Important != nil && *e.Important != cur.Important {
		next.Important = *e.Important
		changed = append(changed, "important")
	}
	if e.SetMetadata && !sameMetadata(e.Metadata, cur.Metadata) {
		next.Metadata = maps.Clone(e.Metadata)
		if len(next.Metadata) == 0 {
			next.Metadata = nil
		}
		changed = append(changed, "metadata")
	}
	return &next, changed
}

// sameMetadata compares metadata as the wire shows it: a number is the same
// number whether it was decoded as an int64 or a float64, and JSON writes
// map keys sorted.
func sameMetadata(a, b map[string]any) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// versionOf is cur's content as it was, to keep cold: the same message
// under a new id, at cur's place in the conversation (Anchor), not pinned
// (cur keeps that role), expiring like any cold chunk.
func (s *Service) versionOf(cur *Message, pol Policy, now time.Time) *Message {
	return &Message{ID: s.NewID(), Role: cur.Role, Content: cur.Content, Name: cur.Name, ToolCallID: cur.ToolCallID,
		ToolCalls: cur.ToolCalls, Important: cur.Important, Metadata: maps.Clone(cur.Metadata), CreatedAt: cur.CreatedAt,
		Tokens: cur.Tokens, State: StateDropped, Kind: KindVersion, VersionOf: cur.ID, Anchor: cur.Position(),
		Prune: cur.Prune, Vector: cur.Vector,
		Cold: &ColdInfo{DropReason: ReasonEdited, DroppedAt: now, RecoverableUntil: now.AddDate(0, 0, pol.RecoverableForDays)}}
}

// appendVersion stores an earlier version at the end of the session. The
// store gives an appended message the session's assistant turn count as
// its turn and counts an assistant message as a new turn; a version is
// neither a new turn nor later than its message, so it takes the turn of
// the message it was, and the count is left as it was (tool output is
// pruned by the turns that followed it).
func appendVersion(tx SessionTx, v *Message, turn int) error {
	sess := tx.Session()
	turns := sess.AssistantTurns
	sess.AssistantTurns = turn
	err := tx.Append(v)
	sess.AssistantTurns = turns
	return err
}

// mirrorEdit brings the cold mirror up to date after an edit: a message
// that has been cold has a line with its old content or metadata, so the
// session's file is rewritten; otherwise the earlier version is appended.
// The store holds the truth: a failure is logged (verify repairs it).
func (s *Service) mirrorEdit(ctx context.Context, tenant, sessionID string, res *EditResult, wasCold bool) {
	if s.Cold == nil {
		return
	}
	if wasCold && (slices.Contains(res.Changed, "content") || slices.Contains(res.Changed, "metadata")) {
		s.rewriteColdMirror(ctx, tenant, sessionID)
		return
	}
	if res.Previous != nil {
		if err := s.Cold.Append(tenant, sessionID, []*Message{res.Previous}); err != nil {
			s.mirrorFailed("mirror the earlier version of message "+res.Message.ID, err)
		}
	}
}

// checkRecoverVersion refuses to put an earlier version of a tool call or
// tool result into the window: beside its current version it would give a
// call two results, or a result no call. A plain message's earlier version
// may come back (it stands right after its current version).
func checkRecoverVersion(m *Message) error {
	if m.IsVersion() && (m.Role == RoleTool || len(m.ToolCalls) > 0) {
		return Errorf(ECONFLICT, "message %s is an earlier version of the tool message %s: it cannot go back into the window beside it; read it with GET /v1/messages/%s",
			m.ID, m.VersionOf, m.ID)
	}
	return nil
}

// groupReach bounds how far from a tool message its group is looked for:
// a call's results follow it directly, and no agent makes hundreds of
// calls in one assistant message.
const groupReach = 256

// toolGroup returns the messages that must stay together with m in a
// chat sequence: an assistant message with tool_calls and the results that
// answer it, grouped as the window builder groups them; m alone otherwise.
// Messages the server wrote later (summaries, earlier versions) sit after
// the conversation in store order and are no part of any group.
func toolGroup(tx SessionTx, m *Message) ([]*Message, error) {
	if m.IsVersion() || m.IsSummary() || (m.Role != RoleTool && len(m.ToolCalls) == 0) {
		return []*Message{m}, nil
	}
	after := uint64(0)
	if m.Seq > groupReach {
		after = m.Seq - groupReach
	}
	near, err := tx.Messages(MessageQuery{AfterSeq: after, Limit: 2*groupReach + 1})
	if err != nil {
		return nil, err
	}
	near = slices.DeleteFunc(near, func(x *Message) bool { return x.IsVersion() || x.IsSummary() })
	for _, u := range groupUnits(near, func(*Message) int { return 0 }) {
		for _, x := range u.msgs {
			if x.ID == m.ID {
				return u.msgs, nil
			}
		}
	}
	return []*Message{m}, nil
}

// DeleteMessage removes one of the caller's messages from the store, both
// indexes and the cold mirror, with its earlier versions, in one
// transaction that keeps the session's totals exact. A message of a tool
// call group (the assistant's call and the tool results answering it) is
// refused with ECONFLICT unless group is true, which deletes the whole
// group: half a group would leave an invalid chat sequence in every
// window. Deleting a summary leaves its sources cold and recoverable. It
// returns the ids deleted. ENOTFOUND for an id the caller does not have.
func (s *Service) DeleteMessage(ctx context.Context, id string, group bool) ([]string, error) {
	m, err := s.Message(ctx, id)
	if err != nil {
		return nil, err
	}
	tenant := TenantFromContext(ctx)
	unlock := s.lockSession(ctx, tenant, m.SessionID)
	defer unlock()
	var gone []*Message
	_, err = s.Store.Update(ctx, tenant, m.SessionID, func(tx SessionTx) error {
		gone = gone[:0]
		cur, err := tx.Message(id)
		if err != nil {
			return err
		}
		members, err := toolGroup(tx, cur)
		if err != nil {
			return err
		}
		if len(members) > 1 && !group {
			return groupConflict(cur, members)
		}
		if gone, err = withVersions(tx, members); err != nil {
			return err
		}
		if err := unlinkDeleted(tx, gone, true); err != nil {
			return err
		}
		for _, g := range gone {
			if err := tx.Delete(g.ID); err != nil {
				return err
			}
		}
		tx.Session().UpdatedAt = s.Now().UTC()
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.syncIndex(ctx)
	ids := make([]string, len(gone))
	now := s.Now().UTC()
	mirrored := false
	for i, g := range gone {
		ids[i] = g.ID
		mirrored = mirrored || g.Cold != nil
		s.event("edits", map[string]any{"tenant": tenant, "session": m.SessionID, "message": g.ID, "op": "delete",
			"requested": id, "state": g.State, "kind": g.Kind, "tokens_before": g.Tokens, "tokens_after": 0, "at": now})
	}
	if mirrored {
		s.rewriteColdMirror(ctx, tenant, m.SessionID)
	}
	return ids, nil
}

// groupConflict explains why one message of a tool-call group cannot go
// alone, and how to delete the group.
func groupConflict(m *Message, members []*Message) error {
	ids := make([]string, len(members))
	for i, x := range members {
		ids[i] = x.ID
	}
	what := "a tool result without the call that asked for it"
	if len(m.ToolCalls) > 0 {
		what = "a call without its results"
	}
	return Errorf(ECONFLICT, "message %s belongs to a tool call group (%s): deleting it alone would leave %s, which chat APIs refuse; "+
		"delete the whole group with DELETE /v1/messages/%s?group=true", m.ID, strings.Join(ids, ", "), what, m.ID)
}

// withVersions is msgs followed by the earlier versions each keeps, those
// still stored: a deleted message's content must not live on in them.
func withVersions(tx SessionTx, msgs []*Message) ([]*Message, error) {
	out := slices.Clone(msgs)
	for _, m := range msgs {
		for _, v := range m.Versions {
			old, err := tx.Message(v)
			if ErrorCode(err) == ENOTFOUND {
				continue // purged with its cold chunks, or deleted
			}
			if err != nil {
				return nil, err
			}
			out = append(out, old)
		}
	}
	return out, nil
}

// unlinkDeleted drops the ids of deleted messages (or about to be) from the
// messages that stay and name them: the versions list of an edited
// message, and with sources the sources of a summary (a purge leaves those:
// a summary names what it was made of, recoverable or not).
func unlinkDeleted(tx SessionTx, gone []*Message, sources bool) error {
	deleted := map[string]bool{}
	for _, g := range gone {
		deleted[g.ID] = true
	}
	// A deleted summary's sources are summarized by nothing now: they stay
	// cold as dropped, not pointing at a message that is gone.
	for _, g := range gone {
		if !g.IsSummary() {
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(g.Sources), func(id string) bool { return deleted[id] })
		if err := releaseSources(tx, g.ID, kept, ReasonSummaryDeleted); err != nil {
			return err
		}
	}
	fix := map[string]bool{}
	for _, g := range gone {
		if g.VersionOf != "" {
			fix[g.VersionOf] = true
		}
		if sources && g.Cold != nil && g.Cold.SummaryID != "" {
			fix[g.Cold.SummaryID] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(fix)) {
		if deleted[id] {
			continue
		}
		m, err := tx.Message(id)
		if ErrorCode(err) == ENOTFOUND {
			continue
		}
		if err != nil {
			return err
		}
		keep := func(ids []string) []string {
			return slices.DeleteFunc(slices.Clone(ids), func(x string) bool { return deleted[x] })
		}
		m.Versions, m.Sources = keep(m.Versions), keep(m.Sources)
		if err := tx.Put(m); err != nil {
			return err
		}
	}
	return nil
}
