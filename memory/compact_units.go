package memory

// unit is what compaction keeps, summarizes or drops as a whole: one
// message, or an assistant message with tool_calls together with the tool
// results that answer it (separating them makes an invalid chat sequence).
type unit struct {
	msgs      []*Message
	tokens    int // window cost now (pruned tool output counts pruned)
	protected string
	score     float64
	decision  string
	active    bool // in the working window, ranked with recoverable cold units
}

// Decisions a compaction makes about a unit.
const (
	DecisionKeep      = "keep"
	DecisionProtected = "protected"
	DecisionDrop      = "drop"
	DecisionSummarize = "summarize"
)

// groupUnits splits a window (in window order) into units.
func groupUnits(window []*Message, cost func(*Message) int) []*unit {
	var units []*unit
	var open *unit
	calls := map[string]bool{}
	for _, m := range window {
		// A second result for one call (stored before writes were checked
		// across each other) is a unit of its own, which no window sends.
		if m.Role == RoleTool && open != nil && calls[m.ToolCallID] {
			calls[m.ToolCallID] = false
			open.msgs = append(open.msgs, m)
			open.tokens += cost(m)
			continue
		}
		u := &unit{msgs: []*Message{m}, tokens: cost(m), decision: DecisionKeep}
		units = append(units, u)
		open = nil
		if m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
			open, calls = u, map[string]bool{}
			for _, tc := range m.ToolCalls {
				calls[tc.ID] = true
			}
		}
	}
	return units
}

// protect marks the units compaction must leave alone, and says why.
func protect(units []*unit, keepRecent int) {
	firstUser := true
	// The last keepRecent messages, widened to whole units: a tool group
	// straddling the boundary is protected with its recent part.
	// Summaries are not turns: they neither count toward nor get the
	// recent protection, so a compaction's own summaries cannot shift
	// which turns are recent.
	recentFrom := len(units)
	for n := 0; recentFrom > 0 && n < keepRecent; {
		recentFrom--
		if !units[recentFrom].msgs[0].IsSummary() {
			n += len(units[recentFrom].msgs)
		}
	}
	for i, u := range units {
		for _, m := range u.msgs {
			switch {
			case m.Pinned:
				u.protected = "pinned"
			case m.IsSummary():
				// a summary is never summarized again: the session's rolling
				// summary is extended in place (rollSummary)
				u.protected = "summary"
			case m.IsStandingSystem():
				u.protected = "system"
			case m.Important:
				u.protected = "important"
			case m.Role == RoleUser && firstUser:
				u.protected = "first_user_message"
			case i >= recentFrom && !m.IsSummary():
				u.protected = "recent"
			}
			if m.Role == RoleUser {
				firstUser = false
			}
		}
		if u.protected != "" {
			u.decision = DecisionProtected
		}
	}
}

// complete reports whether a unit can be sent as is: no tool result without
// the call before it, no call without all its results.
func (u *unit) complete() bool {
	first := u.msgs[0]
	if first.Role == RoleTool {
		return false
	}
	if first.Role != RoleAssistant || len(first.ToolCalls) == 0 {
		return true
	}
	answered := map[string]bool{}
	for _, m := range u.msgs[1:] {
		answered[m.ToolCallID] = true
	}
	for _, tc := range first.ToolCalls {
		if !answered[tc.ID] {
			return false
		}
	}
	return true
}
