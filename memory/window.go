package memory

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/ctxd/ctxd/scoring"
)

// Window sources: which level of the window a message came from.
const (
	SourcePinned    = "pinned"
	SourceSummary   = "summary"
	SourceRecovered = "recovered"
	SourceRecent    = "recent"
	SourceWorking   = "working"
)

// Shares of the budget (after pinned messages and the prompt) each level may
// use first; what a level leaves unused flows to the others.
type Shares struct {
	Summary   float64 `json:"summary" yaml:"summary"`
	Recovered float64 `json:"recovered" yaml:"recovered"`
}

// DefaultShares leave the rest to the working level (recent first).
// Measured on LoCoMo dev (window 4096, budget 2048, evidence in window,
// overall): recovered/summary 0.35/0.15 78.0, 0.6/0.15 80.0, 0.6/0.05 80.3,
// 0.8/0.05 80.8, 0.8/0 82.1, 0.9/0.05 75.6, 0.9/0 76.7 (runs vary by ~2).
// Verbatim recoveries beat summaries for answering; summaries still get
// what the other levels leave.
var DefaultShares = Shares{Summary: 0, Recovered: 0.8}

// ContextRequest asks for the window to send with the next prompt.
type ContextRequest struct {
	Prompt    string
	MaxTokens int // 0: the session's context window minus its reserve
	Explain   bool
	// Preview builds the window a call would build and changes nothing:
	// no cold message moves back (Recovered lists those that would), no
	// compaction runs, no event is logged. A dashboard shows it for a
	// prompt a person types, which must not steer the session.
	Preview bool
}

// WindowMessage is a message as the window hands it out: content may be a
// pruned view of a long tool result.
type WindowMessage struct {
	*Message
	Source     string              `json:"source"`
	Score      float64             `json:"score"`
	Components *scoring.Components `json:"components,omitempty"`
	PruneLevel int                 `json:"prune_level,omitempty"`
}

// ContextResult is the window and what it costs.
type ContextResult struct {
	Messages  []WindowMessage
	Tokens    int
	Recovered []string // moved back into the working window (state recovered)
	// AnswerOnly are cold messages sent in this window (source recovered)
	// but left cold: moving them in would have passed the compaction trigger.
	AnswerOnly []string
	Budget     ContextBudget
	// StablePrefix is how many leading Messages repeat, exactly, the
	// session's previous window: between compactions a window is the last
	// one plus new messages, with whatever varies per prompt after this
	// point. A client caching prompts puts its breakpoint just before
	// Messages[StablePrefix].
	StablePrefix int
	// StableUntil is how many leading Messages the next window repeats
	// exactly, barring a compaction or an edit: everything before the
	// per-prompt recall block (a tool loop's stays, so its whole window),
	// or only the pinned messages of a window chosen by relevance. A
	// client caching prompts writes its breakpoint on
	// Messages[StableUntil-1], which the next call then reads.
	StableUntil int
	// WouldCompact (previews only): the session is past its hard limit, so
	// a real call would compact it first; the preview shows the window as
	// it stands.
	WouldCompact bool
}

// ContextBudget reports the budget and how the levels used it.
type ContextBudget struct {
	MaxTokens    int            `json:"max_tokens"`
	Used         int            `json:"used"`
	PromptTokens int            `json:"prompt_tokens"`
	Levels       map[string]int `json:"levels"`
}

// Context limits.
const (
	maxContextTokens   = 10_000_000
	recoveryCandidates = 100
	recoverNextTop     = 3
)

// Context builds the best window for the next prompt within max_tokens:
// pinned messages, then the most recent turns, summaries, cold originals
// recovered for this prompt, and the most relevant other active turns.
func (s *Service) Context(ctx context.Context, sessionID string, req ContextRequest) (*ContextResult, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	if err := checkPrompt(req.Prompt, s.Limits); err != nil {
		return nil, err
	}
	if req.MaxTokens < 0 || req.MaxTokens > maxContextTokens {
		return nil, Errorf(EINVALID, "max_tokens: %d is outside 1..%d", req.MaxTokens, maxContextTokens)
	}
	if err := s.catchUp(ctx, []string{sessionID}); err != nil {
		return nil, err
	}
	tenant := TenantFromContext(ctx)
	unlock := s.lockSession(ctx, tenant, sessionID)
	defer unlock()
	sess, err := s.Store.Session(ctx, tenant, sessionID)
	if err != nil {
		return nil, err
	}
	wouldCompact := false
	switch {
	case s.status(sess).State != WindowOverLimit:
	case req.Preview:
		wouldCompact = true
	default:
		if _, err := s.compactLocked(ctx, tenant, sessionID, CompactRequest{Prompt: req.Prompt, Trigger: TriggerHardLimit}); err != nil {
			return nil, fmt.Errorf("compact before building the window: %w", err)
		}
		if sess, err = s.Store.Session(ctx, tenant, sessionID); err != nil {
			return nil, err
		}
	}
	b, err := s.newWindowBuilder(ctx, sess, req)
	if err != nil {
		return nil, err
	}
	res, err := b.build(ctx)
	if err == nil {
		res.WouldCompact = wouldCompact
		res.StableUntil = b.stableUntil(res)
		s.noteWindow(ctx, tenant, sessionID, res, req.Preview, b)
	}
	if err != nil || len(res.Recovered) == 0 || req.Preview {
		return res, err
	}
	// Recoveries move in only while the window stays under the trigger
	// (commitRecoveries), so this is a safety net for costs that disagree
	// with the session's count: compact against this prompt (so what was
	// just recovered scores high). Past the hard limit, now; past the
	// trigger, in the background, off this call's latency. The window
	// already built is unaffected.
	if sess, err = s.Store.Session(ctx, tenant, sessionID); err == nil {
		switch s.status(sess).State {
		case WindowOverLimit:
			_, err = s.compactLocked(ctx, tenant, sessionID, CompactRequest{Prompt: req.Prompt, Trigger: TriggerHardLimit})
		case WindowCompactionDue:
			s.compactInBackground(tenant, sessionID, req.Prompt)
		}
	}
	if err != nil {
		s.Logger.Error("compaction after recovery failed", "session", sessionID, "err", err)
	}
	return res, nil
}

type windowBuilder struct {
	s       *Service
	sess    *Session
	prev    *layoutEntry // the session's last window (window_stable.go)
	pol     Policy
	req     ContextRequest
	window  []*Message
	units   []*unit
	qvec    []float32
	avail   int // tokens left for messages
	res     *ContextResult
	chosen  map[*unit]string
	scores  map[string]scoring.Score
	recover []*unit
	views   map[string]msgView // by message id: how it shows, when not as the prune schedule says
	// promptStored: the prompt is the newest stored message, counted once
	// (as that message)
	promptStored bool
	orig         map[string]*Message // messages a tool loop's window may show, by id
	layout       *loopLayout         // the layout this window leaves for the next call
	chatFrom     uint64              // where a conversation window's stable part starts (window_chat.go)
	chatUntil    int                 // where its recall block starts (0: not a conversation window)
}

func (s *Service) newWindowBuilder(ctx context.Context, sess *Session, req ContextRequest) (*windowBuilder, error) {
	pol := s.policy(sess)
	if req.MaxTokens == 0 {
		// A small window cannot give its answer a fixed 4k: the reserve is
		// at most a quarter of it.
		req.MaxTokens = sess.ContextWindow - min(pol.ReserveTokens, sess.ContextWindow/4)
	}
	b := &windowBuilder{s: s, sess: sess, pol: pol, req: req, chosen: map[*unit]string{}, scores: map[string]scoring.Score{}, views: map[string]msgView{},
		res: &ContextResult{Recovered: []string{}, Budget: ContextBudget{MaxTokens: req.MaxTokens, Levels: map[string]int{}}}}
	var err error
	if b.window, err = s.Store.Messages(ctx, sess.Tenant, sess.ID, MessageQuery{States: []State{StateActive, StateRecovered}, Vectors: true}); err != nil {
		return nil, err
	}
	b.prev = s.layout(ctx, sess.Tenant, sess.ID)
	sort.SliceStable(b.window, func(i, j int) bool { return b.window[i].Position() < b.window[j].Position() })
	// A unit missing part of its tool group (an older store, or a crash
	// between writes) cannot be sent: leave it out of every level.
	for _, u := range groupUnits(b.window, b.cost) {
		if u.complete() {
			b.units = append(b.units, u)
		}
	}
	promptTokens := 0
	// An agent in a loop asks for the window of the input it just stored:
	// the prompt is the newest message (or the start of it), which the
	// window holds already. Counting it again took up to a sixth of a
	// coding agent's budget (its prompts are tool outputs).
	// Notes the gateway stored after the input (a flush turn's) do not
	// make it any less the newest: counted again, it overfilled the window.
	n := len(b.window)
	last := sess.LastSeq
	// So do the agent's own notes (pinned, through the API or
	// memory_save) written between its input and this call.
	for n > 0 && (IsGatewayNote(b.window[n-1]) || b.window[n-1].Pinned) && b.window[n-1].Seq == last &&
		!(req.Prompt != "" && strings.HasPrefix(b.window[n-1].Content, req.Prompt)) {
		n, last = n-1, last-1
	}
	if n > 0 && req.Prompt != "" && b.window[n-1].Seq == last && strings.HasPrefix(b.window[n-1].Content, req.Prompt) {
		b.promptStored = true
	}
	if strings.TrimSpace(req.Prompt) != "" && !b.promptStored {
		if promptTokens, err = MessageTokens(s.Tokenizer, sess.Encoding, &Message{Role: RoleUser, Content: req.Prompt}); err != nil {
			return nil, err
		}
	}
	b.res.Budget.PromptTokens = promptTokens
	b.avail = req.MaxTokens - promptTokens - ReplyPriming
	// Counted whole above; from here on the prompt only ranks.
	b.req.Prompt = queryPart(req.Prompt)
	return b, nil
}

// embedPrompt embeds the prompt, when a level ranks by it: a window that
// fits whole, and a tool loop's, do not (embedding an 8,000-character tool
// output was a good part of such a call).
func (b *windowBuilder) embedPrompt(ctx context.Context) error {
	if b.qvec != nil || strings.TrimSpace(b.req.Prompt) == "" {
		return nil
	}
	vecs, err := b.s.embed(ctx, []string{b.req.Prompt})
	if err != nil {
		return fmt.Errorf("embed prompt: %w", err)
	}
	b.qvec = vecs[0]
	return nil
}

func (b *windowBuilder) cost(m *Message) int { return b.pol.windowCost(m, b.sess.AssistantTurns) }

func (b *windowBuilder) build(ctx context.Context) (*ContextResult, error) {
	res, err := b.choose(ctx)
	if err != nil || !b.req.Explain {
		return res, err
	}
	return res, b.explainScores(ctx, res)
}

// explainScores scores, for an explained window, the messages the builder
// did not need to rank (a window that fits whole, a tool loop's recent
// steps), so that --explain shows why each would rank, not zeros. It
// changes nothing in the window.
func (b *windowBuilder) explainScores(ctx context.Context, res *ContextResult) error {
	byID := make(map[string]*Message, len(b.window))
	for _, m := range b.window {
		byID[m.ID] = m
	}
	var missing []*Message
	for _, wm := range res.Messages {
		if _, ok := b.scores[wm.ID]; !ok && byID[wm.ID] != nil {
			missing = append(missing, byID[wm.ID])
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := b.embedPrompt(ctx); err != nil {
		return err
	}
	scores, err := b.s.scoreMessages(ctx, b.sess, b.params(b.pol.scoringParams()), b.req.Prompt, b.qvec, missing, b.window)
	if err != nil {
		return err
	}
	for i := range res.Messages {
		if sc, ok := scores[res.Messages[i].ID]; ok {
			c := sc.Components
			res.Messages[i].Components, res.Messages[i].Score = &c, round4(sc.Total)
		}
	}
	return nil
}

// choose fills the window level by level.
func (b *windowBuilder) choose(ctx context.Context) (*ContextResult, error) {
	if err := b.takePinned(); err != nil {
		return nil, err
	}
	if b.inToolLoop() {
		return b.buildLoop(ctx)
	}
	if b.promptStored && len(b.units) > 0 {
		if res, ok, err := b.buildChat(ctx); err != nil || ok {
			return res, err
		}
	}
	rest := b.avail
	b.takeRecent()
	// With nothing cold to recover and a window that fits whole, there is
	// nothing to rank: skip scoring (the common case for young sessions).
	if b.sess.Counts.Dropped+b.sess.Counts.Summarized == 0 && b.takeAllIfFits() {
		return b.assemble(), nil
	}
	if err := b.embedPrompt(ctx); err != nil {
		return nil, err
	}
	if err := b.scoreWindow(ctx); err != nil {
		return nil, err
	}
	b.takeBest(SourceSummary, func(u *unit) bool { return u.msgs[0].IsSummary() }, int(b.s.Shares.Summary*float64(rest)))
	if err := b.findRecoverable(ctx); err != nil {
		return nil, err
	}
	b.takeRecovered(int(b.s.Shares.Recovered * float64(rest)))
	b.takeBest(SourceWorking, func(u *unit) bool { return !u.msgs[0].IsSummary() }, b.avail)
	// Unused shares flow: verbatim recoveries first, then summaries.
	b.takeRecovered(b.avail)
	b.takeBest(SourceSummary, func(u *unit) bool { return u.msgs[0].IsSummary() }, b.avail)
	if err := b.commitRecoveries(ctx); err != nil {
		return nil, err
	}
	return b.assemble(), nil
}

// takePinned adds pinned and system messages; if they do not fit, no window
// can be built (409).
func (b *windowBuilder) takePinned() error {
	need := 0
	for _, u := range b.units {
		for _, m := range u.msgs {
			if m.Pinned || m.IsStandingSystem() {
				b.chosen[u] = SourcePinned
			}
		}
		if b.chosen[u] == SourcePinned {
			need += u.tokens
		}
	}
	if need > b.avail {
		return Errorf(ECONFLICT, "pinned and system messages need %d tokens but max_tokens %d leaves %d after the prompt: raise max_tokens or unpin messages",
			need, b.req.MaxTokens, b.avail)
	}
	b.use(SourcePinned, need)
	return nil
}

func (b *windowBuilder) use(source string, tokens int) {
	b.avail -= tokens
	b.res.Budget.Levels[source] += tokens
}

// takeRecent adds the newest units, newest first, up to keep_recent messages.
func (b *windowBuilder) takeRecent() {
	n := 0
	for i := len(b.units) - 1; i >= 0 && n < b.pol.KeepRecent; i-- {
		u := b.units[i]
		if _, done := b.chosen[u]; done || u.msgs[0].IsSummary() {
			continue
		}
		if u.tokens > b.avail {
			break // an older unit must not jump over a newer one that did not fit
		}
		b.chosen[u] = SourceRecent
		b.use(SourceRecent, u.tokens)
		n += len(u.msgs)
	}
}

// takeAllIfFits takes every unit left when together they fit.
func (b *windowBuilder) takeAllIfFits() bool {
	need := 0
	for _, u := range b.units {
		if _, done := b.chosen[u]; !done {
			need += u.tokens
		}
	}
	if need > b.avail {
		return false
	}
	for _, u := range b.units {
		if _, done := b.chosen[u]; done {
			continue
		}
		source := SourceWorking
		if u.msgs[0].IsSummary() {
			source = SourceSummary
		}
		b.chosen[u] = source
		b.use(source, u.tokens)
	}
	return true
}

// takeBest adds the best-scoring unchosen units that match, while they fit
// in limit (and in what is left).
func (b *windowBuilder) takeBest(source string, match func(*unit) bool, limit int) {
	var cands []*unit
	for _, u := range b.units {
		if _, done := b.chosen[u]; !done && match(u) {
			cands = append(cands, u)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
	used := 0
	for _, u := range cands {
		if u.tokens > b.avail || used+u.tokens > limit {
			continue
		}
		b.chosen[u] = source
		b.use(source, u.tokens)
		used += u.tokens
	}
}

// assemble lays the chosen units out in window order (a summary or digest
// where its sources stood), system messages first. Each message's tokens is
// the cost of what is sent: a pruned or cut view costs what the view does.
func (b *windowBuilder) assemble() *ContextResult {
	var units []*unit
	for u := range b.chosen {
		units = append(units, u)
	}
	sort.Slice(units, func(i, j int) bool {
		a, c := units[i].msgs[0], units[j].msgs[0]
		if a.Position() != c.Position() {
			return a.Position() < c.Position()
		}
		// a summary or digest stands before the first message it is beside
		if a.Anchor != 0 && c.Anchor == 0 {
			return true
		}
		if c.Anchor != 0 && a.Anchor == 0 {
			return false
		}
		return a.Seq < c.Seq
	})
	var sys, rest []WindowMessage
	used := b.res.Budget.PromptTokens + ReplyPriming
	for _, u := range units {
		for _, m := range u.msgs {
			view := *m
			wm := WindowMessage{Message: &view, Source: b.chosen[u], Score: round4(b.scores[m.ID].Total)}
			if v, ok := b.views[m.ID]; ok {
				view.Content, view.Tokens, wm.PruneLevel = v.content, v.tokens, v.level
			} else {
				lvl := b.pol.pruneLevel(m, b.sess.AssistantTurns)
				view.Content, view.Tokens, wm.PruneLevel = b.pol.prunedContent(m, lvl), b.cost(m), lvl
			}
			if b.req.Explain {
				if sc, ok := b.scores[m.ID]; ok {
					c := sc.Components
					wm.Components = &c
				}
			}
			used += view.Tokens
			if m.IsStandingSystem() {
				sys = append(sys, wm)
			} else {
				rest = append(rest, wm)
			}
		}
	}
	b.res.Messages = append(sys, rest...)
	b.res.Tokens = used
	b.res.Budget.Used = used
	return b.res
}

// stableUntil is res.StableUntil: what buildChat set, the whole window of a
// tool loop whose layout the next call extends, else the leading pinned
// messages.
func (b *windowBuilder) stableUntil(res *ContextResult) int {
	switch {
	case b.chatUntil > 0:
		return b.chatUntil
	case b.layout != nil:
		return len(res.Messages)
	}
	n := 0
	for n < len(res.Messages) && res.Messages[n].Source == SourcePinned {
		n++
	}
	return n
}

func round4(f float64) float64 { return float64(int64(f*10000+0.5)) / 10000 }
