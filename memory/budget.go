package memory

import "time"

// Window states, as the session status reports them.
const (
	WindowOK            = "ok"
	WindowFlushDue      = "flush_due"
	WindowCompactionDue = "compaction_due"
	WindowOverLimit     = "over_limit"
)

// FlushPrompt is what the server tells an agent once per compaction cycle,
// before context is lost: the start of Status.FlushPrompt, which goes on
// to say how much room the notes have (see Service.status).
const FlushPrompt = "the session is near compaction: save durable facts, decisions and preferences now as pinned notes"

// FlushPromptFull replaces the flush prompt when the pinned notes have no
// room left: another note would be refused, so the agent is asked to make
// room, which always succeeds.
const FlushPromptFull = "the session is near compaction and its pinned notes fill their budget: merge notes into fewer, shorter ones or unpin those that need not stay in every window, then save what is new"

// Budget is the policy that turns a window's size into a state (see
// Policy.Budget for the defaults).
type Budget struct {
	TriggerPct     float64 // compaction starts at this share of the context window
	MaxPct         float64 // hard limit
	FlushThreshold int     // tokens before the trigger at which the agent is asked to flush
}

// State classifies a window of tokens out of window.
func (b Budget) State(tokens, window int) string {
	switch {
	case window <= 0:
		return WindowOK
	case float64(tokens) >= b.MaxPct*float64(window):
		return WindowOverLimit
	case float64(tokens) >= b.TriggerPct*float64(window):
		return WindowCompactionDue
	case float64(tokens) >= b.TriggerPct*float64(window)-b.flushMargin(window):
		return WindowFlushDue
	}
	return WindowOK
}

// flushMargin is how many tokens before the trigger the agent is asked to
// flush: FlushThreshold, but at most a quarter of the way to the trigger,
// or a small window (4k tokens: trigger at 2k) would be flush_due from its
// first message and the prompt would mean nothing.
func (b Budget) flushMargin(window int) float64 {
	return min(float64(b.FlushThreshold), b.TriggerPct*float64(window)/4)
}

// Status is a session as the API reports it.
type Status struct {
	ID            string         `json:"id"`
	ContextWindow int            `json:"context_window"`
	Encoding      string         `json:"encoding"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	Tokens        int            `json:"tokens"`
	PctUsed       float64        `json:"pct_used"`
	State         string         `json:"state"`
	Messages      Counts         `json:"messages"`
	Summaries     int            `json:"summaries"`
	Compactions   int            `json:"compactions"`
	FlushPrompt   string         `json:"flush_prompt,omitempty"`
	// NoteRoom, with the flush prompt: the tokens of pinned notes the
	// session can still take (a note past it is refused with 409).
	NoteRoom    *int         `json:"note_room_tokens,omitempty"`
	PromptCache *PromptCache `json:"prompt_cache,omitempty"`
	Policy      Policy       `json:"policy"`
	CreatedAt   time.Time    `json:"created_at"`
	UpdatedAt   time.Time    `json:"updated_at"`
}

// notesFull reports a flush prompt that asks for room rather than notes:
// a flush turn would only have its notes refused.
func (st *Status) notesFull() bool { return st.NoteRoom != nil && *st.NoteRoom < minNoteRoom }

// StatusOf reports s, whose window costs tokens, under budget b.
func (b Budget) StatusOf(s *Session, tokens int) *Status {
	st := &Status{
		ID: s.ID, ContextWindow: s.ContextWindow, Encoding: s.Encoding, Metadata: s.Metadata,
		Tokens: tokens, Messages: s.Counts, Summaries: s.Summaries, Compactions: s.Compactions,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, PromptCache: s.PromptCache.WithRates(),
	}
	if s.ContextWindow > 0 {
		st.PctUsed = float64(int(float64(tokens)/float64(s.ContextWindow)*10000)) / 10000
	}
	st.State = b.State(tokens, s.ContextWindow)
	switch {
	case s.FlushTold != s.Compactions+1:
		// Until the agent has been told once this cycle, a window past the
		// trigger is flush_due: its compaction waits for the flush (see
		// afterAppend). Past the hard limit it cannot wait.
		if st.State == WindowCompactionDue {
			st.State = WindowFlushDue
		}
		if st.State == WindowFlushDue {
			st.FlushPrompt = FlushPrompt
		}
	case st.State == WindowFlushDue:
		// Told already this cycle: flush_due is one signal, sent once with
		// its prompt. An agent that saved notes whenever the state read
		// flush_due wrote one set per write until the pinned budget
		// refused them.
		st.State = WindowOK
	}
	return st
}
