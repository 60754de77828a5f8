package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// The gateway lets an agent that knows nothing of ctxd use it: the agent
// sends its model calls (OpenAI Chat Completions, Anthropic Messages) to
// ctxd with its whole history every time; ctxd stores what it has not seen,
// sends the upstream the window it builds instead of that history, and
// stores the answer. This file is the domain half: the wire formats and the
// upstream call live in httpapi, which translates both into Messages.
//
// History that diverges: a client that edits or regenerates resends a
// history whose prefix matches the stored session only up to some message.
// The stored messages after that point are superseded: moved to cold storage
// with drop reason "superseded" (searchable, readable by id, never put back
// into a window), and the client's new tail is stored after them. The session
// is never branched, and the two tails are never mixed in a window. System
// messages are matched apart, as a set (see sync).

// ReasonSuperseded: the client resent a history that replaced this message
// (an edit or a regenerated answer); it is kept cold and never recovered.
const ReasonSuperseded = "superseded"

// IsSuperseded reports whether m was replaced by a client's diverging history.
func (m *Message) IsSuperseded() bool { return m.Cold != nil && m.Cold.DropReason == ReasonSuperseded }

// Gateway is the domain service behind the drop-in model endpoints.
type Gateway struct {
	s *Service
	// locks serialise the gateway's calls on one session (striped like
	// Service.lockSession, and separate from it: Append and Context take
	// that one themselves). Without them two calls of one session could
	// both find the same history unseen and store it twice.
	locks [256]sync.Mutex

	// ratios calibrate each session's counts to its provider's (see
	// Calibrate), by tenant and session. They live in memory: after a
	// restart a session starts again at 1, and an overflow's retry covers
	// the first call.
	mu     sync.Mutex
	ratios map[string]float64
	// compactions is each session's compaction count when its last window
	// was built: a compaction that storing the last answer ran (after that
	// call's headers went) is told with the next window, the first it
	// shaped.
	compactions map[string]int
	// calls counts each session's calls, and flushedAt the call of its
	// last flush turn: flush turns are spaced (minCallsPerFlush).
	calls, flushedAt map[string]int
	// synced is what matching needs of each session's stored messages
	// (see gateway_sync.go).
	synced syncCache
}

// NewGateway returns the gateway of s.
func NewGateway(s *Service) *Gateway {
	return &Gateway{s: s, ratios: map[string]float64{}, compactions: map[string]int{}, calls: map[string]int{}, flushedAt: map[string]int{}}
}

// Calibration bounds: the margin added to what the provider reported, and
// the range a ratio is kept in. It never goes below 1: a provider that
// counts fewer tokens than ctxd leaves the window a little under-filled,
// which costs nothing; a report far above 4 is an image-heavy prompt or a
// provider's bug, not a tokenizer's difference.
const (
	calibrationMargin  = 1.05
	minRatio, maxRatio = 1.0, 4.0
)

// maxRatios bounds the calibrations kept: one per session the gateway has
// seen would grow without end on a long-running server. When full it
// starts over; a session then builds its next window at 1 again, as after
// a restart.
const maxRatios = 100_000

// Calibrate learns, from the prompt tokens the upstream reported for a
// window that cost sent tokens in ctxd's count, how the provider's
// tokenizer compares with the session's encoding: later windows of the
// session are built to fit the model's window in the provider's count. A
// Claude or Gemini tokenizer counts the same text as more tokens than
// o200k_base; without this a window ctxd counts as full overfills it.
func (g *Gateway) Calibrate(ctx context.Context, session string, sent, reported int) {
	if sent <= 0 || reported <= 0 {
		return
	}
	key := TenantFromContext(ctx) + "\x00" + session
	g.mu.Lock()
	defer g.mu.Unlock()
	// A provider that counts no more than ctxd (its tokenizer is the
	// session's encoding, as OpenAI's is) needs no margin: it would only
	// leave a twentieth of every window empty.
	target := minRatio
	if reported > sent {
		target = min(max(float64(reported)/float64(sent)*calibrationMargin, minRatio), maxRatio)
	}
	old, ok := g.ratios[key]
	if ok && target < old {
		// One report under the ratio (a window ctxd over-counted, one
		// mostly of text that tokenizes alike) does not undo what the
		// others showed: a ratio reset to 1 overfilled the next window
		// in the provider's count. It comes down a quarter of the way.
		target = old - (old-target)/4
	}
	if target <= minRatio+0.001 {
		delete(g.ratios, key)
		return
	}
	if len(g.ratios) >= maxRatios {
		clear(g.ratios)
	}
	g.ratios[key] = target
}

// minCallsPerFlush spaces a session's flush turns: each is one more model
// call, and a small window compacts every few calls; one in twenty keeps
// them under 5 per 100 client calls.
const minCallsPerFlush = 20

// flushAllowed counts one call of the session (not a retry) and reports
// whether a flush turn due now may run.
func (g *Gateway) flushAllowed(key string, retry bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !retry {
		if len(g.calls) >= maxRatios {
			clear(g.calls)
			clear(g.flushedAt)
		}
		g.calls[key]++
	}
	last, ok := g.flushedAt[key]
	return !ok || g.calls[key]-last >= minCallsPerFlush
}

// Flushed records that the session's flush turn ran on this call.
func (g *Gateway) Flushed(ctx context.Context, session string) {
	key := TenantFromContext(ctx) + "\x00" + session
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flushedAt[key] = g.calls[key]
}

// compactionsSeen answers the session's compaction count at its last
// window (before, for a session not seen since the start) and records now.
func (g *Gateway) compactionsSeen(key string, before, now int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen, ok := g.compactions[key]
	if !ok {
		seen = before
	}
	if len(g.compactions) >= maxRatios {
		clear(g.compactions)
	}
	g.compactions[key] = now
	return seen
}

// ratio is the session's calibration, 1 until the upstream reported usage.
func (g *Gateway) ratio(tenant, session string) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r, ok := g.ratios[tenant+"\x00"+session]; ok {
		return r
	}
	return 1
}

// loadRatio takes the session's calibration from the store, where the
// node that learnt it last (RecordUsage) left it: with several nodes the
// calls of one session go to any of them, and a ratio kept only where it
// was learnt overfilled the windows the others built.
func (g *Gateway) loadRatio(ctx context.Context, tenant, session string) {
	sess, err := g.s.Store.Session(ctx, tenant, session)
	if err != nil {
		return // a new session (or a failing store, which Prepare reports next)
	}
	key := tenant + "\x00" + session
	g.mu.Lock()
	defer g.mu.Unlock()
	if sess.Calibration <= minRatio {
		delete(g.ratios, key)
		return
	}
	if len(g.ratios) >= maxRatios {
		clear(g.ratios)
	}
	g.ratios[key] = min(sess.Calibration, maxRatio)
}

// lock serializes the gateway's calls on a session: on this node, then,
// on a store that other nodes share, across nodes (SessionLocker). The
// node's own lock comes first, so that one node's calls queue in memory and
// hold at most one of the database's lock connections between them.
func (g *Gateway) lock(ctx context.Context, tenant, id string) (func(), error) {
	mu := &g.locks[stripe(tenant, id, len(g.locks))]
	mu.Lock()
	sl, ok := g.s.Store.(SessionLocker)
	if !ok {
		return mu.Unlock, nil
	}
	unlock, err := sl.LockSession(ctx, tenant, id)
	if err != nil {
		mu.Unlock()
		return nil, err
	}
	return func() {
		unlock()
		mu.Unlock()
	}, nil
}

// GatewaySessionID names the session of a gateway call: the name the
// client gave (X-Ctxd-Session); else its own id for the caller (OpenAI's
// user, Anthropic's metadata.user_id, the Responses API's
// prompt_cache_key) together with the conversation's identity; else a hash
// of that identity alone. The identity is the system prompt and the first
// user message, which stay the same on every call of one conversation. A
// client's id alone named one session for all its calls, and its side
// calls (titles, summaries) and subagents, which carry the same id,
// superseded its main conversation's stored messages.
func GatewaySessionID(named, user, system, firstUser string) string {
	if named != "" {
		return named
	}
	if user != "" {
		return GatewayConversationID("gw-user-", user, system, firstUser)
	}
	return "gw-" + shortHash(system+"\x00"+firstUser)
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}

// GatewayRequest is one model call as the gateway sees it.
type GatewayRequest struct {
	Session string
	// History is the client's messages, oldest first, as it sent them.
	// Prepare does not change them: an adapter may give the same messages
	// to later calls that resend them.
	History []*Message
	// ContextWindow is the model's window in tokens; 0: the session's.
	ContextWindow int
	// Tools is the tool definitions as sent upstream: their cost is
	// reserved.
	Tools string
	// Reserve is what the window must leave free: the answer's max tokens
	// and the tool definitions.
	Reserve int
	// Harder asks for a smaller window after the upstream refused the last
	// one as too long: the session is compacted first and the budget cut.
	Harder bool
	// After continues the session from one of its stored answers (the
	// Responses API's previous_response_id): History holds only the new
	// input, which is stored after that answer; what the session stored
	// after it is superseded. "": History is the whole conversation.
	After string
	// Repeat says which leading messages of History repeat an earlier
	// call's exactly (the adapter knows it from the bytes the client sent):
	// those were validated and matched then, and are not again.
	Repeat HistoryRepeat
}

// HistoryRepeat names a gateway call and how much of its history the next
// call repeats. An agent resends its whole history on every call:
// validating and matching all of it made each call cost what the session
// had grown to.
type HistoryRepeat struct {
	// Call is this call's id (0: none), given by the adapter, unique
	// among its calls.
	Call uint64
	// Of is the id of an earlier call (0: none) whose History's first N
	// messages that are not standing system messages are, in every field,
	// this call's first N such (standing system messages are always read,
	// and matched as a set). Used only when Of was the last call matched
	// against this session; else the whole history is read.
	Of uint64
	N  int
}

// GatewayMessage is one message of the window to send upstream.
type GatewayMessage struct {
	WindowMessage
	// Client is the index in GatewayRequest.History of the client message
	// this one was stored from, when it is sent as stored (not pruned, cut,
	// a summary or a digest); -1 otherwise. The adapter sends the client's
	// own form then, so content ctxd does not model (images, cache
	// controls, thinking blocks) passes through intact.
	Client int
	// Origin is that index whenever the message was stored from this
	// call's history, sent as stored or not (-1: not from it). An adapter
	// that must keep a turn whole (Anthropic's final assistant turn with
	// its thinking block) sends the client's form from it.
	Origin int
}

// GatewayWindow is what the gateway sends upstream in place of the
// client's history, and what it did to build it.
type GatewayWindow struct {
	Session    string
	Messages   []GatewayMessage
	Tokens     int
	MaxTokens  int
	ToolTokens int      // what the tool definitions cost, in ctxd's count
	Ratio      float64  // the session's calibration the window was built with
	Stored     int      // client messages stored by this call
	Superseded []string // stored messages the client's history replaced
	Recovered  int      // cold messages brought back for this window
	Compacted  bool     // a compaction ran during this call
	// Answer is the answer's reserve the window was built with: the
	// client's max tokens, or less when they would leave the history less
	// than half of the window (AnswerLowered); the adapter sends it.
	Answer        int
	AnswerLowered bool
	// Matched is how many messages of the history this call validated and
	// matched against the stored session one by one: those the last call
	// did not send (see HistoryRepeat), or all.
	Matched int
	// StablePrefix is how many leading Messages repeat the session's
	// previous window exactly (see ContextResult.StablePrefix): where the
	// adapter places the provider's cache breakpoint.
	StablePrefix int
	// syncedAt is the session's version when matching recorded its state.
	syncedAt string
	// FlushDue: this call's writes brought the session near compaction for
	// the first time this cycle; the gateway gives the model its one chance
	// to save notes (see FlushInstruction) before the compaction.
	FlushDue bool
}

// harderShare is the budget of the retry after an overflow: the upstream
// counts tokens its own way (another tokenizer, images), so the retry leaves
// it a quarter of headroom rather than trying the same size again.
const harderShare = 0.75

// Prepare stores the part of req.History the session has not seen
// (superseding a stored tail that the history diverges from) and builds the
// window for its newest message within the model's window. EINVALID for a
// bad session id, message or budget; ECONFLICT when pinned messages and the
// newest turn cannot fit.
func (g *Gateway) Prepare(ctx context.Context, req GatewayRequest) (*GatewayWindow, error) {
	if err := ValidateSessionID(req.Session); err != nil {
		return nil, err
	}
	if len(req.History) == 0 {
		return nil, Errorf(EINVALID, "messages: at least one message is required")
	}
	// What is refused is refused before anything is written: a refused
	// call leaves no session behind.
	tenant := TenantFromContext(ctx)
	// A repeated part that the session's last call validated is not read
	// again (a state of call Of exists only once Of was validated).
	repeated := 0
	if req.Repeat.Of != 0 && req.Repeat.N > 0 && req.After == "" && g.synced.lastCall(tenant+"\x00"+req.Session) == req.Repeat.Of {
		repeated = req.Repeat.N
	}
	if err := validateMessagesFrom(req.History, repeated, g.s.Limits); err != nil {
		return nil, err
	}
	if req.After == "" && !slices.ContainsFunc(req.History, func(m *Message) bool { return m.Role != RoleTool }) {
		return nil, Errorf(EINVALID, "messages: only tool results, and the calls they answer are not in the history: there is no conversation to send")
	}
	unlock, err := g.lock(ctx, tenant, req.Session)
	if err != nil {
		return nil, err
	}
	defer unlock()
	window, enc, setWindow, err := g.window(ctx, req.Session, req.ContextWindow)
	if err != nil {
		return nil, err
	}
	tools := 0
	if req.Tools != "" {
		if tools, err = g.s.Tokenizer.Count(enc, req.Tools); err != nil {
			return nil, fmt.Errorf("count the tool definitions: %w", err)
		}
	}
	// The window and the answer are in the provider's count; the tools and
	// the history in ctxd's, scaled by the session's calibration.
	if g.s.SharedStore {
		g.loadRatio(ctx, tenant, req.Session)
	}
	ratio := g.ratio(tenant, req.Session)
	// What any window must hold: the system prompt and the newest message.
	must := 0
	for i, m := range req.History {
		if m.IsStandingSystem() || i == len(req.History)-1 {
			n, err := MessageTokens(g.s.Tokenizer, enc, m)
			if err != nil {
				return nil, fmt.Errorf("count the history: %w", err)
			}
			must += n
		}
	}
	answer, lowered := fitAnswer(window, req.Reserve, int(float64(tools)*ratio), int(float64(must)*ratio))
	maxTokens := int(float64(window-answer)/ratio) - tools
	if maxTokens < 1 {
		return nil, Errorf(EINVALID, "the model's context window (%d tokens) leaves no room for the history after %d tokens for the answer and %d for the tools: lower max_tokens or set X-Ctxd-Context-Window",
			window, req.Reserve, tools)
	}
	if setWindow != nil {
		if err := setWindow(); err != nil {
			return nil, err
		}
	}
	out := &GatewayWindow{Session: req.Session, MaxTokens: maxTokens, ToolTokens: tools, Ratio: ratio, Answer: answer, AnswerLowered: lowered}
	compactionsBefore := 0
	switch before, err := g.s.Store.Session(ctx, tenant, req.Session); {
	case err == nil:
		compactionsBefore = before.Compactions
	case ErrorCode(err) != ENOTFOUND: // a new session is created by its first write
		return nil, err
	}
	client, err := g.sync(ctx, tenant, req, out)
	if err != nil {
		return nil, err
	}
	// The newest message, but a system message a client puts after its
	// user's (Claude Code's reminders) is not what the user asked.
	prompt := req.History[len(req.History)-1].Content
	for i := len(req.History) - 1; i >= 0; i-- {
		if req.History[i].Role != RoleSystem {
			prompt = req.History[i].Content
			break
		}
	}
	// Whole, so that it is counted whole (ranking takes a part of it);
	// cut only where no message could hold it.
	if len(prompt) > g.s.Limits.MaxContentBytes {
		prompt = prompt[:g.s.Limits.MaxContentBytes]
		for !utf8.ValidString(prompt) {
			prompt = prompt[:len(prompt)-1]
		}
	}
	if req.Harder {
		rep, err := g.s.Compact(ctx, req.Session, CompactRequest{Prompt: prompt, Trigger: TriggerManual})
		if err != nil {
			return nil, fmt.Errorf("compact after an upstream overflow: %w", err)
		}
		out.Compacted = out.Compacted || rep != nil
		out.MaxTokens = int(harderShare * float64(maxTokens))
	}
	res, err := g.s.Context(ctx, req.Session, ContextRequest{Prompt: prompt, MaxTokens: out.MaxTokens})
	if err != nil {
		return nil, err
	}
	out.FlushDue = out.FlushDue && g.flushAllowed(tenant+"\x00"+req.Session, req.Harder)
	out.Tokens, out.Recovered = res.Tokens, len(res.Recovered)+len(res.AnswerOnly)
	out.StablePrefix = res.StablePrefix
	for _, wm := range res.Messages {
		gm := GatewayMessage{WindowMessage: wm, Client: -1, Origin: -1}
		if i, ok := client[wm.ID]; ok {
			gm.Origin = i
			if wm.PruneLevel == 0 && wm.Content == req.History[i].Content {
				gm.Client = i
			}
		}
		out.Messages = append(out.Messages, gm)
	}
	if len(out.Messages) == 0 {
		// An upstream answers "messages: []" with its own 400, or worse.
		return nil, Errorf(EINVALID, "messages: no message of the history can be sent (a tool result needs its call): there is no conversation to send")
	}
	// Compactions run on the writes (this call's, or the last answer's),
	// before the window and in the retry: the session's count says whether
	// any did since the session's last window.
	if after, err := g.s.Store.Session(ctx, tenant, req.Session); err == nil {
		out.Compacted = out.Compacted || after.Compactions > g.compactionsSeen(tenant+"\x00"+req.Session, compactionsBefore, after.Compactions)
		// a compaction or a recovery changes none of what matching reads
		g.synced.moved(tenant+"\x00"+req.Session, out.syncedAt, sessionVersion(after), nil)
	}
	return out, nil
}

// minAnswer is the least a lowered answer reserve keeps: room for a tool
// call, and above Anthropic's least thinking budget (1,024).
const minAnswer = 2048

// fitAnswer is the answer's reserve: the client's, unless it leaves the
// history less than an eighth of the window after the tools (Claude Code
// asks 32,000 whatever the window; a client that leaves less on purpose
// gets a window that small): then half of that room, or less when the
// system prompt and the newest message need more, never under minAnswer
// or the client's own smaller figure. Refusing the call would break the
// agent; a lower limit only ends a long answer sooner.
func fitAnswer(window, reserve, tools, must int) (int, bool) {
	room := window - tools
	if room-reserve >= room/8 {
		return reserve, false
	}
	lowered := room / 2
	if room-lowered < must {
		lowered = room - must
	}
	lowered = max(lowered, min(reserve, minAnswer))
	return min(lowered, reserve), lowered < reserve
}

// window is the session's window and encoding for a call that names
// window (0: keep the session's, or the server's default for a new one),
// and what gives the session that window, so compaction triggers at the
// right size; nil when there is nothing to write. It writes nothing
// itself: the call may yet be refused.
func (g *Gateway) window(ctx context.Context, id string, window int) (int, string, func() error, error) {
	st, err := g.s.GetSession(ctx, id)
	if err != nil && ErrorCode(err) != ENOTFOUND {
		return 0, "", nil, err
	}
	if err == nil && (window == 0 || st.ContextWindow == window) {
		return st.ContextWindow, st.Encoding, nil, nil
	}
	enc := g.s.Defaults.Encoding
	if err == nil {
		enc = st.Encoding
	}
	if window == 0 {
		// a new session: its first write creates it with the defaults
		return g.s.Defaults.ContextWindow, enc, nil, nil
	}
	set := func() error {
		if _, err := g.s.PutSession(ctx, id, SessionUpdate{ContextWindow: &window}); err != nil {
			return fmt.Errorf("set the session's context window: %w", err)
		}
		return nil
	}
	return window, enc, set, nil
}

// GatewayNoteKey marks, in a message's metadata, a note the gateway stored
// itself (a flush turn's save_memory): the client never sends it back, so
// it takes no part in matching the client's history.
const GatewayNoteKey = "ctxd_note"

// InstructionsKey marks, in a system message's metadata, a client's
// instructions (the Responses API's field): a continuation's new
// instructions replace them.
const InstructionsKey = "ctxd_instructions"

// IsGatewayNote reports whether the gateway stored m itself.
func IsGatewayNote(m *Message) bool { return m.Metadata[GatewayNoteKey] == true }

// GatewayConversationID names a session from a client's own session id
// (Claude Code's X-Claude-Code-Session-Id, Anthropic's metadata.user_id)
// and the conversation's identity (its system prompt and first user
// message): a CLI's side calls (titles, summaries) and subagents carry
// the same id as its main conversation, and sharing one session they
// superseded each other's stored messages.
func GatewayConversationID(prefix, id, system, firstUser string) string {
	return prefix + shortHash(id)[:12] + "-" + shortHash(system + "\x00" + firstUser)[:12]
}

// supersede moves msgs (a stored tail the client's history no longer has)
// to cold storage for good, in one transaction.
func (g *Gateway) supersede(ctx context.Context, tenant, id string, msgs []*Message) ([]string, error) {
	s := g.s
	now := s.Now().UTC()
	var sess *Session
	var err error
	if sess, err = s.Store.Session(ctx, tenant, id); err != nil {
		return nil, err
	}
	days := s.policy(sess).RecoverableForDays
	var ids []string
	var mirror []*Message
	_, err = s.Store.Update(ctx, tenant, id, func(tx SessionTx) error {
		ids, mirror = ids[:0], mirror[:0]
		for _, orig := range msgs {
			m, err := tx.Message(orig.ID)
			if ErrorCode(err) == ENOTFOUND {
				continue // deleted meanwhile
			}
			if err != nil {
				return err
			}
			ci := ColdInfo{DropReason: ReasonSuperseded, DroppedAt: now, RecoverableUntil: now.AddDate(0, 0, days)}
			if m.Cold != nil {
				// cold already: it keeps its retention, and its mirror line
				ci.DroppedAt, ci.RecoverableUntil = m.Cold.DroppedAt, m.Cold.RecoverableUntil
			} else {
				mirror = append(mirror, m)
			}
			m.State, m.Cold = StateDropped, &ci
			if err := tx.Put(m); err != nil {
				return err
			}
			ids = append(ids, m.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("supersede the stored tail the history diverges from: %w", err)
	}
	s.syncIndex(ctx)
	if s.Cold != nil && len(mirror) > 0 {
		if err := s.Cold.Append(tenant, id, mirror); err != nil {
			s.Logger.Error("mirror superseded messages", "session", id, "err", err)
		}
	}
	s.event("drops", map[string]any{"tenant": tenant, "session": id, "reason": ReasonSuperseded, "messages": ids})
	return ids, nil
}

// StoreAnswer stores the upstream's answer (text and tool calls) at the end
// of the session and answers its id. An answer with neither (a stream cut
// before its first token) stores nothing and answers "".
func (g *Gateway) StoreAnswer(ctx context.Context, session string, answer *Message) (string, error) {
	if answer.Content == "" && len(answer.ToolCalls) == 0 {
		return "", nil
	}
	tenant := TenantFromContext(ctx)
	unlock, err := g.lock(ctx, tenant, session)
	if err != nil {
		return "", err
	}
	defer unlock()
	before := g.version(ctx, tenant, session)
	// The client never sees this write's status: a flush prompt it carries
	// is the next call's to act on.
	res, err := g.s.AppendWith(ctx, session, []*Message{answer}, AppendOptions{Untold: true})
	if err != nil {
		return "", fmt.Errorf("store the upstream's answer: %w", err)
	}
	l := light(answer)
	l.ID = res.IDs[0]
	g.synced.moved(tenant+"\x00"+session, before, g.version(ctx, tenant, session), l)
	return res.IDs[0], nil
}

// The flush turn: when a compaction that drops or summarizes content is
// near, the gateway sends the upstream one extra request (the window, the
// agent's tools and SaveMemoryTool, then FlushInstruction), stores the
// notes the model saves through the tool, and does not show that turn to
// the client or store it as conversation. The session's flush state makes
// it once per compaction cycle.
const (
	SaveMemoryTool        = "save_memory"
	SaveMemoryDescription = "Save one durable note (a fact, decision, preference or open task) that must survive when older parts of this conversation are compacted. Call once per note."
	FlushInstruction      = "[ctxd] This conversation is about to be compacted: older messages will be summarized or moved out of your context. Before that, call save_memory once for each durable fact, decision, preference or open task you will still need. Do not answer the user in this turn."
)

// maxFlushNotes bounds the notes one flush turn stores: each is pinned,
// and pinned notes share the session's pinned budget.
const maxFlushNotes = 20

// SaveNotes stores the notes a flush turn saved as pinned system messages
// marked as the gateway's (GatewayNoteKey), so they stay in every window
// and take no part in matching the client's history. ECONFLICT when they
// would pass the session's pinned budget.
func (g *Gateway) SaveNotes(ctx context.Context, session string, notes []string) error {
	tenant := TenantFromContext(ctx)
	stored, err := g.s.Store.Messages(ctx, tenant, session, MessageQuery{States: []State{StateActive, StateRecovered}})
	if err != nil && ErrorCode(err) != ENOTFOUND {
		return err
	}
	// A note the session holds already is not stored again: a model asked
	// twice saves much the same facts.
	seen := map[string]bool{}
	for _, m := range stored {
		if IsGatewayNote(m) {
			seen[noteKey(strings.TrimPrefix(m.Content, notePrefix))] = true
		}
	}
	var msgs []*Message
	for _, n := range notes {
		n = strings.TrimSpace(n)
		if seen[noteKey(n)] {
			continue
		}
		seen[noteKey(n)] = true
		if n != "" && len(msgs) < maxFlushNotes {
			msgs = append(msgs, &Message{Role: RoleSystem, Content: notePrefix + n, Pinned: true,
				Metadata: map[string]any{GatewayNoteKey: true}})
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	unlock, err := g.lock(ctx, tenant, session)
	if err != nil {
		return err
	}
	defer unlock()
	before := g.version(ctx, tenant, session)
	if _, err := g.s.Append(ctx, session, msgs); err != nil {
		return fmt.Errorf("store the flush turn's notes: %w", err)
	}
	g.synced.moved(tenant+"\x00"+session, before, g.version(ctx, tenant, session), nil)
	return nil
}

const notePrefix = "Note saved before compaction: "

// noteKey is what two notes that say the same thing share: their words,
// lowercased, without punctuation.
func noteKey(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}), " ")
}
