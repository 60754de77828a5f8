package memory

import (
	"fmt"
	"regexp"
	"time"
)

// Encodings the server can count tokens in.
const (
	EncodingO200k  = "o200k_base"
	EncodingCL100k = "cl100k_base"
)

// ValidEncoding reports whether the server can count tokens in enc.
func ValidEncoding(enc string) bool { return enc == EncodingO200k || enc == EncodingCL100k }

// SessionIDPattern is API.md's rule for session ids, as a regular
// expression (the MCP tools' input schemas carry it too).
const SessionIDPattern = `^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$`

var sessionIDPattern = regexp.MustCompile(SessionIDPattern)

// ValidateSessionID checks an id against API.md: 1 to 128 characters of
// [A-Za-z0-9._:-], not starting with a dot (so no id is a path like "..").
func ValidateSessionID(id string) error {
	if !sessionIDPattern.MatchString(id) {
		return Errorf(EINVALID, "session id %q: use 1 to 128 characters of A-Z a-z 0-9 . _ : - not starting with '.'", Truncate(id, 140))
	}
	return nil
}

func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Counts is how many messages of a session are in each state.
type Counts struct {
	Active     int `json:"active"`
	Summarized int `json:"summarized"`
	Dropped    int `json:"dropped"`
	Recovered  int `json:"recovered"`
}

func (c Counts) String() string {
	return fmt.Sprintf("%d active, %d recovered, %d summarized, %d dropped", c.Active, c.Recovered, c.Summarized, c.Dropped)
}

// Add adds delta to the count of state s.
func (c *Counts) Add(s State, delta int) {
	switch s {
	case StateActive:
		c.Active += delta
	case StateSummarized:
		c.Summarized += delta
	case StateDropped:
		c.Dropped += delta
	case StateRecovered:
		c.Recovered += delta
	}
}

// Total is the number of messages of all states.
func (c Counts) Total() int { return c.Active + c.Summarized + c.Dropped + c.Recovered }

// Session is a conversation's record: its settings and running totals.
// Tokens is the exact cost of the working window (active, recovered and
// active summary messages), kept current by every write in the same transaction.
type Session struct {
	Tenant        string         `json:"tenant"`
	ID            string         `json:"id"`
	ContextWindow int            `json:"context_window"`
	Encoding      string         `json:"encoding"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	Tokens        int            `json:"tokens"`
	Counts        Counts         `json:"messages"`
	Summaries     int            `json:"summaries"`
	Compactions   int            `json:"compactions"`
	LastSeq       uint64         `json:"last_seq"`
	// AssistantTurns counts the assistant messages stored, for pruning.
	AssistantTurns int `json:"assistant_turns"`
	// Prunable lists the long tool results in the window, with what each
	// costs at each prune level: the window's exact cost depends on how many
	// assistant turns followed them.
	Prunable map[string]PruneEntry `json:"prunable,omitempty"`
	// PinnedTokens is what the pinned and system messages in the window
	// cost (see PinnedCost), kept with Tokens by every write. nil in a
	// session stored before it was kept: the first write that needs it
	// counts it from the messages (pinnedTotal).
	PinnedTokens *int `json:"pinned_tokens,omitempty"`
	// Policy holds the session's own compaction settings.
	Policy *PolicyOverrides `json:"policy,omitempty"`
	// FlushTold is Compactions+1 once the agent was told to flush in the
	// current compaction cycle, so it is told once per cycle.
	FlushTold int `json:"flush_told,omitempty"`
	// CompactHold is what the window cost after the last compaction when
	// that could not bring it under the trigger (everything left was
	// protected, or nothing could be freed); 0 otherwise. Automatic
	// compactions under the hard limit wait until the window has grown a
	// band past it (Policy.compactHeld): run on every write, each broke the
	// prompt cache to free a few tokens, or nothing.
	CompactHold int `json:"compact_hold,omitempty"`
	// CompactHoldSeq is LastSeq when CompactHold was set: once keep_recent
	// messages have come since, what was protected as recent no longer is,
	// and the hold ends.
	CompactHoldSeq uint64 `json:"compact_hold_seq,omitempty"`
	// PromptCache adds up what the provider's prompt cache did for the
	// session's gateway calls, as the provider reported it.
	PromptCache *PromptCache `json:"prompt_cache,omitempty"`
	// Calibration is the gateway's ratio of the provider's token count to
	// the session's (Gateway.Calibrate), kept with the session so that
	// nodes sharing a store build its windows alike; 0: none learnt.
	Calibration float64   `json:"calibration,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// SessionUpdate is a partial change of a session's settings: nil fields keep
// their value.
type SessionUpdate struct {
	ContextWindow *int
	Encoding      *string
	Metadata      map[string]any
	Policy        *PolicyOverrides
}

// MaxRecoverableForDays bounds a session's recoverable_for_days: a cold
// chunk's recoverable_until must stay a time JSON can write (year 9999).
const MaxRecoverableForDays = 36_500

// MaxWeight bounds a session's scoring weights: two weights of 1e308 sum to
// +Inf, and scoring then finds no weight above 0 and refuses every
// compaction of the session.
const MaxWeight = 1000

// Validate checks the values that are set.
func (u SessionUpdate) Validate() error {
	if u.ContextWindow != nil && (*u.ContextWindow < 256 || *u.ContextWindow > 10_000_000) {
		return Errorf(EINVALID, "context_window: %d is outside 256..10000000 tokens", *u.ContextWindow)
	}
	if p := u.Policy; p != nil && p.RecoverableForDays != nil && *p.RecoverableForDays > MaxRecoverableForDays {
		return Errorf(EINVALID, "recoverable_for_days: %d is over the limit of %d (100 years)", *p.RecoverableForDays, MaxRecoverableForDays)
	}
	if p := u.Policy; p != nil {
		for field, w := range map[string]*float64{"weight_similarity": p.WeightSimilarity, "weight_recency": p.WeightRecency,
			"weight_references": p.WeightReferences, "weight_importance": p.WeightImportance} {
			if w != nil && *w > MaxWeight {
				return Errorf(EINVALID, "%s: %v is over the limit of %v (weights are relative)", field, *w, MaxWeight)
			}
		}
	}
	if u.Encoding != nil && !ValidEncoding(*u.Encoding) {
		return Errorf(EINVALID, "encoding: %q is not one of o200k_base, cl100k_base", *u.Encoding)
	}
	// A session's metadata comes back in every status and listing: it has
	// the limits of a message's (the configurable limits are the others).
	return checkMetadata(u.Metadata, DefaultLimits)
}

// Apply writes the set fields of u into s.
func (u SessionUpdate) Apply(s *Session) {
	if u.ContextWindow != nil {
		s.ContextWindow = *u.ContextWindow
	}
	if u.Encoding != nil {
		s.Encoding = *u.Encoding
	}
	if u.Metadata != nil {
		s.Metadata = u.Metadata
	}
	s.Policy = s.Policy.Merge(u.Policy)
}
