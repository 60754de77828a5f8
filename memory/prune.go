package memory

import (
	"fmt"
	"unicode/utf8"
)

// Prune levels of a tool result in the window handed out. Stored originals
// are never modified.
const (
	PruneNone    = 0
	PruneTrimmed = 1 // head + "..." + tail, with a note
	PruneCleared = 2 // a placeholder naming the id to recover
)

// PruneCosts are the window costs (tokens, with overhead) of a long tool
// result's pruned forms, counted once when it is stored.
type PruneCosts struct {
	Trimmed int `json:"trimmed"`
	Cleared int `json:"cleared"`
}

// PruneEntry is a long tool result the session's window cost depends on.
type PruneEntry struct {
	Turn    int `json:"turn"`
	Full    int `json:"full"`
	Trimmed int `json:"trimmed"`
	Cleared int `json:"cleared"`
}

// pruneLevel says how a message shows in the window when the session has
// had assistantTurns assistant messages. Only long tool results are pruned;
// user and assistant messages never are.
func (p Policy) pruneLevel(m *Message, assistantTurns int) int {
	if m.Role != RoleTool || utf8.RuneCountInString(m.Content) <= p.ToolTrimChars {
		return PruneNone
	}
	return p.levelAfter(assistantTurns - m.Turn)
}

func (p Policy) levelAfter(turnsSince int) int {
	switch {
	case turnsSince >= p.ToolClearAfterTurns:
		return PruneCleared
	case turnsSince >= p.ToolTrimAfterTurns:
		return PruneTrimmed
	}
	return PruneNone
}

// prunedContent is m's content at a prune level.
func (p Policy) prunedContent(m *Message, level int) string {
	switch level {
	case PruneTrimmed:
		r := []rune(m.Content)
		head, tail := string(r[:p.ToolKeepHeadChars]), string(r[len(r)-p.ToolKeepTailChars:])
		return fmt.Sprintf("%s\n...\n%s\n[tool result trimmed: %d characters, %d tokens; recover id %s]", head, tail, len(r), m.Tokens, m.ID)
	case PruneCleared:
		return fmt.Sprintf("[tool result cleared: %d tokens; recover id %s]", m.Tokens, m.ID)
	}
	return m.Content
}

// pruneCosts counts what a long tool result costs at each level.
func (p Policy) pruneCosts(tok Tokenizer, enc string, m *Message) (*PruneCosts, error) {
	if m.Role != RoleTool || utf8.RuneCountInString(m.Content) <= p.ToolTrimChars {
		return nil, nil
	}
	var c PruneCosts
	for level, dst := range map[int]*int{PruneTrimmed: &c.Trimmed, PruneCleared: &c.Cleared} {
		view := *m
		view.Content = p.prunedContent(m, level)
		n, err := MessageTokens(tok, enc, &view)
		if err != nil {
			return nil, err
		}
		*dst = n
	}
	return &c, nil
}

// windowTokens is the exact cost of the session's window as handed out:
// stored costs, less what pruning takes off long tool results.
func (p Policy) windowTokens(sess *Session) int {
	total := sess.Tokens
	for _, e := range sess.Prunable {
		switch p.levelAfter(sess.AssistantTurns - e.Turn) {
		case PruneTrimmed:
			total -= e.Full - e.Trimmed
		case PruneCleared:
			total -= e.Full - e.Cleared
		}
	}
	return total
}
