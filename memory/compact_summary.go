package memory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// A session has one live summary at a time, and it rolls: each compaction
// that summarizes writes a section for what it summarized and appends it to
// the summary in place (same id, same place in the window); when the
// sections outgrow the summary's size the oldest fall off, their originals
// staying cold, searchable and recoverable. A summary is never summarized
// again. Summarizing each run apart, and summaries with the rest, had made
// 2,974 summaries for 2,046 originals in a 300-turn coding session, 1,375 of
// them summaries of summaries and one original the source of 111.

// sectionSep separates the sections of a rolling summary.
const sectionSep = "\n\n---\n\n"

// metaSections is the summary's metadata key listing how many sources each
// section has, oldest first ("12,8,15").
const metaSections = "section_sources"

// rollingCap is the most the rolling summary may cost: twice a section's
// target, at most an eighth of the window.
func rollingCap(pol Policy, sess *Session) int {
	return max(min(2*pol.SummaryTargetTokens, sess.ContextWindow/8), 64)
}

// rollSummary summarizes the units marked for summary into a new section of
// the session's live summary (or a first summary). A run too short to be
// worth a summary, or whose section would not be smaller than it, is
// dropped instead. It returns the summary to write (Seq set when it extends
// the stored one), the ids of the sources whose section fell off (they stay
// cold as dropped: no live summary covers them), and the window's estimated
// cost after.
func (s *Service) rollSummary(ctx context.Context, sess *Session, pol Policy, window []*Message, units []*unit, rep *CompactionReport) (*rolled, int, error) {
	tokens := 0
	var msgs []*Message
	runTokens := 0
	for _, u := range units {
		switch u.decision {
		case DecisionKeep, DecisionProtected:
			tokens += u.tokens
		case DecisionSummarize:
			msgs = append(msgs, u.msgs...)
			runTokens += u.tokens
		}
	}
	dropAll := func() {
		for _, u := range units {
			if u.decision == DecisionSummarize {
				u.decision = DecisionDrop
			}
		}
	}
	if len(msgs) == 0 {
		return &rolled{}, tokens, nil
	}
	if len(msgs) < minSummaryRun {
		// A summary of one or two turns is mostly header: drop them (still
		// recoverable by id and by search).
		dropAll()
		return &rolled{}, tokens, nil
	}
	sum, err := s.Summarizer.Summarize(ctx, SummaryRequest{Messages: msgs, TargetTokens: summaryTarget(pol, sess, runTokens),
		Encoding: sess.Encoding, Prompt: rep.Prompt})
	if err != nil {
		return nil, 0, fmt.Errorf("summarize %d messages: %w", len(msgs), err)
	}
	rep.SummaryMethod = sum.Method
	if sum.Note != "" {
		rep.Notes = append(rep.Notes, sum.Note)
	}
	var live *Message
	for _, m := range window {
		if m.IsSummary() && m.InWindow() && (live == nil || m.Seq > live.Seq) {
			live = m
		}
	}
	m := &Message{ID: s.NewID(), Role: RoleAssistant, Kind: KindSummary, State: StateActive, Anchor: msgs[0].Seq}
	var sections []string
	var sizes []int
	liveTokens := 0
	if live != nil {
		cp := *live
		m, liveTokens = &cp, live.Tokens
		m.Metadata = map[string]any{}
		for k, v := range live.Metadata {
			m.Metadata[k] = v
		}
		m.Sources = append([]string(nil), live.Sources...)
		sections, sizes = splitSections(live)
		m.Anchor = min(m.Position(), msgs[0].Seq)
	}
	if m.Metadata == nil {
		m.Metadata = map[string]any{}
	}
	m.Metadata["summary_method"] = sum.Method
	m.CreatedAt = msgs[len(msgs)-1].CreatedAt
	sections = append(sections, sum.Text)
	sizes = append(sizes, len(msgs))
	for _, src := range msgs {
		m.Sources = append(m.Sources, src.ID)
	}
	// The oldest sections fall off while the summary is over its cap.
	limit := rollingCap(pol, sess)
	var released []string
	for {
		m.Content = strings.Join(sections, sectionSep)
		n, err := MessageTokens(s.Tokenizer, sess.Encoding, m)
		if err != nil {
			return nil, 0, err
		}
		m.Tokens = n
		if n <= limit || len(sections) == 1 {
			break
		}
		k := min(sizes[0], len(m.Sources))
		released = append(released, m.Sources[:k]...)
		m.Sources = m.Sources[k:]
		sections, sizes = sections[1:], sizes[1:]
	}
	if m.Tokens-liveTokens >= runTokens {
		dropAll() // the summary would grow by more than it replaces
		return &rolled{}, tokens, nil
	}
	parts := make([]string, len(sizes))
	for i, n := range sizes {
		parts[i] = strconv.Itoa(n)
	}
	m.Metadata[metaSections] = strings.Join(parts, ",")
	vecs, err := s.embed(ctx, []string{EmbedText(m)})
	if err != nil {
		return nil, 0, fmt.Errorf("embed summary: %w", err)
	}
	m.Vector = vecs[0]
	// The compression ratio is the run against its own section: the
	// summary's growth also nets out the sections that fell off.
	section, err := s.Tokenizer.Count(sess.Encoding, sum.Text)
	if err != nil {
		return nil, 0, fmt.Errorf("count summary section: %w", err)
	}
	rep.summarizedTokens, rep.sectionTokens = runTokens, section
	rep.Summaries = append(rep.Summaries, m.ID)
	return &rolled{summary: m, released: released}, tokens - liveTokens + m.Tokens, nil
}

// rolled is what rollSummary decided: the summary to write (nil: none), and
// the sources no live summary covers any more.
type rolled struct {
	summary  *Message
	released []string
}

// splitSections reads a rolling summary's sections and their source counts.
// A summary written before summaries rolled is one section.
func splitSections(m *Message) ([]string, []int) {
	sections := strings.Split(m.Content, sectionSep)
	var sizes []int
	if v, ok := m.Metadata[metaSections].(string); ok {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				sizes = nil
				break
			}
			sizes = append(sizes, n)
		}
	}
	if len(sizes) != len(sections) {
		return []string{m.Content}, []int{len(m.Sources)}
	}
	return sections, sizes
}

// releaseSources unlinks the messages ids from the summary that held them
// (a rolled summary let go of its oldest sources, or the summary was
// deleted): each still pointing at it is cold storage's for reason, and
// one summarized is dropped. Messages gone meanwhile, or summarized by
// another summary since, are left as they are.
func releaseSources(tx SessionTx, summaryID string, ids []string, reason string) error {
	for _, id := range ids {
		m, err := tx.Message(id)
		if ErrorCode(err) == ENOTFOUND {
			continue // purged or deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("release source %s of summary %s: %w", id, summaryID, err)
		}
		if m.Cold == nil || m.Cold.SummaryID != summaryID {
			continue
		}
		m.Cold.SummaryID, m.Cold.DropReason = "", reason
		if m.State == StateSummarized {
			m.State = StateDropped
		}
		if err := tx.Put(m); err != nil {
			return fmt.Errorf("release source %s of summary %s: %w", id, summaryID, err)
		}
	}
	return nil
}
