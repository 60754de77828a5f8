package main

import (
	"encoding/json"
	"fmt"
	"time"
)

// The answers the CLI reads, as the wire has them (../shared/API.md). They
// are the client's view, decoupled from the domain's types on purpose: the
// CLI reads what the server sends, whatever version it is.

type countsWire struct {
	Active     int `json:"active"`
	Summarized int `json:"summarized"`
	Dropped    int `json:"dropped"`
	Recovered  int `json:"recovered"`
}

type statusWire struct {
	ID            string     `json:"id"`
	ContextWindow int        `json:"context_window"`
	Encoding      string     `json:"encoding"`
	Tokens        int        `json:"tokens"`
	PctUsed       float64    `json:"pct_used"`
	State         string     `json:"state"`
	Messages      countsWire `json:"messages"`
	Summaries     int        `json:"summaries"`
	Compactions   int        `json:"compactions"`
	FlushPrompt   string     `json:"flush_prompt"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

type messageWire struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id"`
	Role      string    `json:"role"`
	Name      string    `json:"name"`
	Content   string    `json:"content"`
	Tokens    int       `json:"tokens"`
	State     string    `json:"state"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
}

type coldChunkWire struct {
	messageWire
	DropReason       string    `json:"drop_reason"`
	RelevanceScore   float64   `json:"relevance_score"`
	RecoverableUntil time.Time `json:"recoverable_until"`
	DroppedAt        time.Time `json:"dropped_at"`
}

type searchResultWire struct {
	messageWire
	Score float64 `json:"score"`
}

type componentsWire struct {
	Similarity float64 `json:"similarity"`
	Recency    float64 `json:"recency"`
	References float64 `json:"references"`
	Importance float64 `json:"importance"`
}

type windowMessageWire struct {
	messageWire
	Source     string          `json:"source"`
	Score      float64         `json:"score"`
	Components *componentsWire `json:"components"`
	PruneLevel int             `json:"prune_level"`
}

type contextWire struct {
	Messages  []windowMessageWire `json:"messages"`
	Tokens    int                 `json:"tokens"`
	Recovered []string            `json:"recovered"`
	Budget    struct {
		MaxTokens    int            `json:"max_tokens"`
		Used         int            `json:"used"`
		PromptTokens int            `json:"prompt_tokens"`
		Levels       map[string]int `json:"levels"`
	} `json:"budget"`
}

type compactionWire struct {
	Trigger       string   `json:"trigger"`
	DryRun        bool     `json:"dry_run"`
	TokensBefore  int      `json:"tokens_before"`
	TokensAfter   int      `json:"tokens_after"`
	Target        int      `json:"target"`
	Dropped       []string `json:"dropped"`
	Summarized    []string `json:"summarized"`
	Summaries     []string `json:"summaries"`
	Pruned        []string `json:"pruned"`
	ProtectedOnly bool     `json:"protected_only"`
	SummaryMethod string   `json:"summary_method"`
	Notes         []string `json:"notes"`
	TookMS        float64  `json:"took_ms"`
	Error         string   `json:"error"`
	Scores        []struct {
		ID       string  `json:"id"`
		Tokens   int     `json:"tokens"`
		Decision string  `json:"decision"`
		Reason   string  `json:"reason"`
		Score    float64 `json:"score"`
	} `json:"scores"`
}

// decodeAll decodes each item of a listing.
func decodeAll[T any](raw []json.RawMessage) ([]T, error) {
	out := make([]T, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return nil, fmt.Errorf("decode item %d of the answer: %w", i, err)
		}
	}
	return out, nil
}

// dropEventWire is an event of the drops stream.
type dropEventWire struct {
	Time      time.Time `json:"time"`
	Session   string    `json:"session"`
	Chunk     string    `json:"chunk"`
	Reason    string    `json:"reason"`
	Score     float64   `json:"score"`
	Threshold float64   `json:"threshold"`
	Tokens    int       `json:"tokens"`
	SummaryID string    `json:"summary_id"`
}
