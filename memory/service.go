package memory

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
)

// Defaults are the settings a session gets when nothing else is said.
type Defaults struct {
	ContextWindow int
	Encoding      string
}

// DefaultDefaults are the documented defaults.
var DefaultDefaults = Defaults{ContextWindow: 128_000, Encoding: EncodingO200k}

// Service is ctxd's domain: sessions, messages, token budgets and search, over
// the small interfaces the adapters implement. Fields are set before Open.
type Service struct {
	Store     Store
	Index     Index
	Embedder  Embedder
	Tokenizer Tokenizer
	// Summarizer writes compaction summaries.
	Summarizer Summarizer
	// Cold mirrors cold chunks as inspectable JSONL; optional.
	Cold ColdMirror
	// Events records compactions, drops and recoveries; optional.
	Events   EventLog
	Policy   Policy // the server's; sessions may override fields
	Limits   Limits
	Defaults Defaults
	Logger   *slog.Logger
	Now      func() time.Time

	// Shares split the context budget between the window's levels.
	Shares Shares
	// PurgeInterval is how often expired cold chunks are purged; 0 uses
	// DefaultPurgeInterval.
	PurgeInterval time.Duration
	// RecoverNext brings the turn after a recovered one along with it.
	RecoverNext bool
	// NoFeedback leaves out the second search of a hybrid search of a few
	// sessions, with pseudo-relevance feedback (see withFeedback).
	NoFeedback bool

	// Reembed allows Open to re-embed every stored message when the data dir
	// was embedded by another model; without it Open refuses.
	Reembed bool
	// Concurrency bounds compactions and embedding calls; zero fields use
	// DefaultConcurrency.
	Concurrency Concurrency
	// EventReader reads the event log back for callers; optional.
	EventReader EventReader
	// SharedStore says other nodes write to the store too: reads that use
	// the index catch it up first (see catchUp), waiting at most
	// CatchUpWait (0: DefaultCatchUpWait).
	SharedStore bool
	CatchUpWait time.Duration

	ix           *indexer
	sessionLocks [1024]sync.Mutex // see lockSession
	idMu         sync.Mutex
	entropy      *ulid.MonotonicEntropy
	ready        atomic.Bool
	cancel       context.CancelFunc
	closing      <-chan struct{} // closed when Close begins
	wg           sync.WaitGroup
	bg           sync.WaitGroup // background compactions and index catch-ups, for Wait
	salient      salientCache
	layouts      layoutCache // each session's last window (window_stable.go)
	counts       countCache
	compactSem   semaphore
	embedSem     semaphore
	queued       sync.Map      // tenant\x00session -> background compaction queued
	syncQueued   atomic.Bool   // a background index catch-up is pending
	syncKick     chan struct{} // starts the pending catch-up now (Wait)
	mirror       mirrorHealth
	nextExpiry   atomic.Int64 // unix ns of the earliest cold retention the last purge saw; 0: none
	blank        blankVector  // see queryVector
	failed       chan error   // see Failed
}

// Open checks the embedding model, brings the index up to date with the
// store, and starts the background loops. The service answers only after
// Open; the vectors load and the cold mirror is reconciled with the store
// while it answers (nothing read whole before it is ready).
func (s *Service) Open(ctx context.Context) error {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Limits == (Limits{}) {
		s.Limits = DefaultLimits
	}
	if s.Policy == (Policy{}) {
		s.Policy = DefaultPolicy
	}
	if err := s.Policy.Validate(); err != nil {
		return fmt.Errorf("compaction policy: %w", err)
	}
	if s.Shares == (Shares{}) {
		s.Shares = DefaultShares
	}
	if s.Defaults == (Defaults{}) {
		s.Defaults = DefaultDefaults
	}
	s.entropy = ulid.Monotonic(rand.Reader, 0)
	if s.Concurrency.Compactions <= 0 {
		s.Concurrency.Compactions = DefaultConcurrency.Compactions
	}
	if s.Concurrency.Embeds <= 0 {
		s.Concurrency.Embeds = DefaultConcurrency.Embeds
	}
	s.compactSem = make(semaphore, s.Concurrency.Compactions)
	s.embedSem = make(semaphore, s.Concurrency.Embeds)
	s.ix = &indexer{store: s.Store, index: s.Index, log: s.Logger.With("component", "indexer"), background: s.SharedStore}
	if err := s.checkModel(ctx); err != nil {
		return err
	}
	building, err := s.ix.open(ctx)
	if err != nil {
		return err
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	s.cancel, s.closing = cancel, loopCtx.Done()
	s.syncKick = make(chan struct{}, 1)
	s.wg.Add(1)
	go s.maintain(loopCtx)
	s.failed = make(chan error, 1)
	s.wg.Add(1)
	s.bg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.bg.Done()
		if err := s.ix.loadInBackground(loopCtx); err != nil && loopCtx.Err() == nil {
			s.failed <- err
		}
	}()
	// The mirror is reconciled while the service serves: it reads every
	// session's cold messages, which grows with the store, and it holds
	// each session's lock while it works on it. Close waits for it (its
	// context is not the loops'), so a clean stop leaves the mirror whole.
	s.wg.Add(1)
	s.bg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.bg.Done()
		if err := s.reconcileCold(context.WithoutCancel(ctx)); err != nil {
			s.mirrorFailed("reconcile the cold mirror with the store at start", err)
		}
		// Not fatal: a store with a damaged record must still serve
		// (verify names it); the maintain loop purges again.
		if n, err := s.Purge(loopCtx, s.Now()); err != nil && loopCtx.Err() == nil {
			s.Logger.Error("purge expired cold chunks at start", "err", err)
		} else if n > 0 {
			s.Logger.Info("purged expired cold chunks at start", "count", n)
		}
	}()
	if building {
		s.wg.Add(1)
		s.bg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.bg.Done()
			s.runBuild(loopCtx)
		}()
	}
	s.ready.Store(true)
	return nil
}

// Wait returns once the background work queued before it (compactions a
// context call started, index catch-ups) is done and the index holds every
// change in the store: what a caller wrote and compacted is then searchable
// and settled. Tests wait with it instead of sleeping.
func (s *Service) Wait(ctx context.Context) error {
	// The catch-up deferred appends queued need not wait out its delay.
	select {
	case s.syncKick <- struct{}{}:
	default:
	}
	done := make(chan struct{})
	go func() {
		s.bg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("wait for background work: %w", ctx.Err())
	}
	last, err := s.Store.LastSeq(ctx)
	if err != nil {
		return err
	}
	return s.ix.sync(ctx, last)
}

// Close stops the background loops. It does not close the adapters: their
// owner opened them.
func (s *Service) Close() error {
	if s.cancel != nil {
		s.cancel()
		s.wg.Wait()
	}
	return nil
}

// DefaultMaintainInterval is how often the background loop retries a lagging
// index and trims the change log.
const DefaultMaintainInterval = 2 * time.Second

// DefaultPurgeInterval is how often expired cold chunks are purged.
const DefaultPurgeInterval = time.Hour

func (s *Service) maintain(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(DefaultMaintainInterval)
	defer t.Stop()
	if s.PurgeInterval <= 0 {
		s.PurgeInterval = DefaultPurgeInterval
	}
	purge := time.NewTicker(s.PurgeInterval)
	defer purge.Stop()
	var trimmed uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-purge.C:
			if n, err := s.Purge(ctx, s.Now()); err != nil {
				s.Logger.Error("purge expired cold chunks", "err", err)
			} else if n > 0 {
				s.Logger.Info("purged expired cold chunks", "count", n)
			}
			continue
		case <-t.C:
		}
		s.retryMirror(ctx)
		if s.purgeDue(s.Now()) {
			if n, err := s.Purge(ctx, s.Now()); err != nil {
				s.Logger.Error("purge expired cold chunks", "err", err)
			} else if n > 0 {
				s.Logger.Info("purged expired cold chunks", "count", n)
			}
		}
		last, err := s.Store.LastSeq(ctx)
		if err != nil {
			continue
		}
		if err := s.ix.sync(ctx, last); err != nil {
			s.Logger.Error("index catch-up failed; will retry", "err", err)
			continue
		}
		if wm := s.ix.watermark.Load(); wm > trimmed+ChangeBatch {
			if err := s.ix.trim(ctx); err != nil {
				s.Logger.Warn("trim change log", "err", err)
				continue
			}
			trimmed = wm
		}
	}
}

// Ready reports whether the store and indexes are open and caught up enough
// to answer, and why not.
func (s *Service) Ready(ctx context.Context) error {
	if !s.ready.Load() {
		return Errorf(EUNAVAILABLE, "starting: the index is catching up with the store")
	}
	if p := s.ix.lastErr.Load(); p != nil {
		return Errorf(EUNAVAILABLE, "index is behind the store: %v", *p)
	}
	if p := s.ix.loadErr.Load(); p != nil {
		return Errorf(EUNAVAILABLE, "vectors did not load from the store: %v", *p)
	}
	return s.mirrorError()
}

// Failed receives the error that stops the service after Open: the
// vectors did not load from the store (a damaged store file), which before
// they loaded after Open refused the start. The owner stops the process.
func (s *Service) Failed() <-chan error { return s.failed }

// Started reports whether Open has finished: before that no request is served.
func (s *Service) Started() bool { return s.ready.Load() }

// IndexLag is how many store changes the index does not hold yet.
func (s *Service) IndexLag(ctx context.Context) uint64 {
	last, err := s.Store.LastSeq(ctx)
	if err != nil || s.ix == nil {
		return 0
	}
	wm := s.ix.watermark.Load()
	if wm >= last {
		return 0
	}
	return last - wm
}

// policy is the session's effective compaction policy.
func (s *Service) policy(sess *Session) Policy { return sess.Policy.Apply(s.Policy) }

// status reports a session under its policy.
// minNoteRoom is the least room for notes a flush prompt asks the agent to
// fill: below it the prompt asks for room instead.
const minNoteRoom = 64

func (s *Service) status(sess *Session) *Status {
	p := s.policy(sess)
	st := p.Budget().StatusOf(sess, p.windowTokens(sess))
	st.Policy = p
	if st.FlushPrompt != "" && sess.PinnedTokens != nil {
		// The prompt says how much the notes may take, so an agent that
		// obeys it is never refused for its notes.
		room := max(pinnedLimit(p, sess)-*sess.PinnedTokens, 0)
		st.NoteRoom = &room
		if room < minNoteRoom {
			st.FlushPrompt = FlushPromptFull
		} else {
			st.FlushPrompt = fmt.Sprintf("%s (at most %d tokens of notes in all; past that, merge or unpin older notes first)", FlushPrompt, room)
		}
	}
	return st
}

// NewID returns a new message id: a ULID, so ids sort by creation time.
func (s *Service) NewID() string {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(s.Now()), s.entropy).String()
}

func (s *Service) newSession(tenant, id string) func() *Session {
	return func() *Session {
		now := s.Now().UTC()
		// A new session's pinned total is known (none): the store keeps it
		// from the first write on.
		var pinned int
		return &Session{Tenant: tenant, ID: id, ContextWindow: s.Defaults.ContextWindow,
			Encoding: s.Defaults.Encoding, PinnedTokens: &pinned, CreatedAt: now, UpdatedAt: now}
	}
}

// EmbedText is what a message is embedded and searched as: the speaker's name
// is part of what was said, and a tool call's name and arguments are its text.
func EmbedText(m *Message) string {
	var b strings.Builder
	if m.Name != "" {
		b.WriteString(m.Name)
		b.WriteString(": ")
	}
	b.WriteString(m.Content)
	for _, tc := range m.ToolCalls {
		fmt.Fprintf(&b, "\n%s(%s)", tc.Function.Name, tc.Function.Arguments)
	}
	return b.String()
}

// forEachSession visits every session of every tenant.
func (s *Service) forEachSession(ctx context.Context, fn func(*Session) error) error {
	return VisitSessions(ctx, s.Store, fn)
}

// VisitSessions visits every session of every tenant, by tenant then id.
func VisitSessions(ctx context.Context, st Store, fn func(*Session) error) error {
	tenants, err := st.Tenants(ctx)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		after := ""
		for {
			page, err := st.Sessions(ctx, t, after, 500)
			if err != nil {
				return err
			}
			for _, sess := range page {
				if err := fn(sess); err != nil {
					return err
				}
			}
			if len(page) < 500 {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	return nil
}
