package main

import "fmt"

// `ctxd-bench eval --agent turns.jsonl --chat` replays conversations, not
// tool loops: each LoCoMo-style conversation is a run whose messages are
// its turns as the LoCoMo eval stores them (evalMessages: the first
// speaker the user, the other the assistant), so the agent replay measures
// what a chat costs with a prompt cache (cached prefix, cost per call
// beside compact-at-limit) and what its windows show.

// loadChatRuns reads a turns file into runs, one per conversation.
func loadChatRuns(path string, limit int) ([]agentRun, error) {
	convs, err := loadTurns(path)
	if err != nil {
		return nil, err
	}
	var runs []agentRun
	for _, c := range convs {
		msgs, _, err := evalMessages(c)
		if err != nil {
			return nil, err
		}
		r := agentRun{ID: "chat:" + c.ID}
		for _, m := range msgs {
			r.Messages = append(r.Messages, agentMessage{Role: m.Role, Content: m.Content})
		}
		if len(r.Messages) < 2 {
			continue // nothing to answer
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("load chats: %s has no conversation of two speakers", path)
	}
	if limit > 0 && limit < len(runs) {
		runs = runs[:limit]
	}
	return runs, nil
}
