package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/tokenizer"
)

// testTokenizer is shared by the tests: an encoding loads (and is checked
// against tiktoken-go) once per tokenizer, ~0.3 s, which a count per
// message would pay again and again.
var testTokenizer = sync.OnceValue(tokenizer.New)

// recount counts a returned window exactly, as the client would send it.
func recount(t *testing.T, msgs []any, prompt string) int {
	t.Helper()
	tok := testTokenizer()
	total := memory.ReplyPriming
	if prompt != "" {
		n, _ := memory.MessageTokens(tok, memory.EncodingO200k, &memory.Message{Role: memory.RoleUser, Content: prompt})
		total += n
	}
	for _, x := range msgs {
		m := x.(map[string]any)
		wm := &memory.Message{Role: memory.Role(m["role"].(string)), Content: m["content"].(string)}
		if n, ok := m["name"].(string); ok {
			wm.Name = n
		}
		if id, ok := m["tool_call_id"].(string); ok {
			wm.ToolCallID = id
		}
		if tcs, ok := m["tool_calls"].([]any); ok {
			for _, tc := range tcs {
				c := tc.(map[string]any)
				f := c["function"].(map[string]any)
				wm.ToolCalls = append(wm.ToolCalls, memory.ToolCall{ID: c["id"].(string), Type: "function",
					Function: memory.FunctionCall{Name: f["name"].(string), Arguments: f["arguments"].(string)}})
			}
		}
		n, err := memory.MessageTokens(tok, memory.EncodingO200k, wm)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// checkSequence asserts the window is a valid OpenAI chat sequence.
func checkSequence(t *testing.T, msgs []any) {
	t.Helper()
	open := map[string]bool{}
	seenNonSystem := false
	for i, x := range msgs {
		m := x.(map[string]any)
		role := m["role"].(string)
		if role == "system" && seenNonSystem {
			t.Fatalf("message %d: system message after the conversation started", i)
		}
		if role != "system" {
			seenNonSystem = true
		}
		if role != "tool" && len(open) > 0 {
			t.Fatalf("message %d: tool calls %v left without results", i, open)
		}
		switch role {
		case "assistant":
			if tcs, ok := m["tool_calls"].([]any); ok {
				for _, tc := range tcs {
					open[tc.(map[string]any)["id"].(string)] = true
				}
			}
		case "tool":
			id := m["tool_call_id"].(string)
			if !open[id] {
				t.Fatalf("message %d: tool result %s without the call before it", i, id)
			}
			delete(open, id)
		}
		if m["source"] == nil {
			t.Fatalf("message %d has no source", i)
		}
	}
	if len(open) > 0 {
		t.Fatalf("window ends with unanswered tool calls %v", open)
	}
}

func toolTurn(i int, output string) []map[string]any {
	id := fmt.Sprintf("call_%d", i)
	return []map[string]any{
		{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": "run", "arguments": fmt.Sprintf(`{"step":%d}`, i)}}}},
		{"role": "tool", "tool_call_id": id, "content": output},
	}
}

func TestContextExactBudgetAndValidSequence(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/c", map[string]any{"context_window": 200000})
	ts.store("c", map[string]any{"role": "system", "content": "You are a build assistant.", "pinned": true})
	for i := 0; i < 12; i++ {
		out := fmt.Sprintf("step %d ok\n", i) + strings.Repeat(fmt.Sprintf("log line %d: compiled package %d\n", i, i), 1+i*30)
		ts.store("c", append([]map[string]any{msg("user", fmt.Sprintf("run step %d of the build", i))}, toolTurn(i, out)...)...)
		ts.store("c", msg("assistant", fmt.Sprintf("step %d finished", i)))
	}
	for _, max := range []int{400, 1000, 2500, 8000, 60000} {
		prompt := "did step 3 compile package 3?"
		body := ts.mustDo(200, "POST", "/v1/sessions/c/context", map[string]any{"prompt": prompt, "max_tokens": max})
		msgs := body["messages"].([]any)
		got := recount(t, msgs, prompt)
		if got > max {
			t.Fatalf("max_tokens %d: window costs %d by exact recount", max, got)
		}
		if int(body["tokens"].(float64)) != got || int(body["budget"].(map[string]any)["used"].(float64)) != got {
			t.Fatalf("max_tokens %d: reported %v tokens, recount %d", max, body["tokens"], got)
		}
		checkSequence(t, msgs)
		if msgs[0].(map[string]any)["source"] != "pinned" {
			t.Fatalf("max_tokens %d: the pinned system prompt is not first", max)
		}
		for i := 1; i < len(msgs); i++ {
			a, b := msgs[i-1].(map[string]any)["created_at"].(string), msgs[i].(map[string]any)["created_at"].(string)
			if a > b {
				t.Fatalf("max_tokens %d: not chronological at %d", max, i)
			}
		}
	}
	// Old long tool output is pruned in the working window (the session's
	// tokens), but a tool loop's window shows the newest steps whole while
	// the caller's budget holds them: this one holds all twelve.
	body := ts.mustDo(200, "POST", "/v1/sessions/c/context", map[string]any{"prompt": "status", "max_tokens": 150000})
	whole := 0
	for _, x := range body["messages"].([]any) {
		m := x.(map[string]any)
		c := m["content"].(string)
		if strings.Contains(c, "[tool result") || m["prune_level"] != nil {
			t.Fatalf("a tool result is pruned in a window with room for it whole: %.80q", c)
		}
		if m["role"] == "tool" {
			whole++
		}
	}
	if whole != 12 {
		t.Fatalf("%d tool results in the window, want all 12", whole)
	}
	// A small budget keeps the current turn whole and the newest before it.
	small := ts.mustDo(200, "POST", "/v1/sessions/c/context", map[string]any{"prompt": "status", "max_tokens": 2500})
	sm := small["messages"].([]any)
	if last := sm[len(sm)-1].(map[string]any); last["content"] != "step 11 finished" {
		t.Fatalf("the newest message is not last in a small window: %v", last["content"])
	}
	raw := 0
	for _, m := range allMessages(ts, "c") {
		raw += int(m["tokens"].(float64))
		if strings.HasPrefix(m["content"].(string), "[tool result") {
			t.Fatal("a stored original was modified by pruning")
		}
	}
	st := ts.mustDo(200, "GET", "/v1/sessions/c", nil)
	if int(st["tokens"].(float64)) >= raw {
		t.Fatalf("session tokens %v do not reflect pruning (stored %d)", st["tokens"], raw)
	}
	if got := recount(t, sm, "status"); got != int(small["tokens"].(float64)) {
		t.Fatalf("small window: reported %v, recount %d", small["tokens"], got)
	}
}

// storeBuriedFact stores a fact (the wifi password, ids[1]) and then enough
// chatter in a 2,000-token session for compaction to take the fact cold.
func storeBuriedFact(ts *testServer, session string) []string {
	ts.mustDo(200, "PUT", "/v1/sessions/"+session, map[string]any{"context_window": 2000})
	ids := ts.store(session, msg("user", "hi there"), msg("user", "By the way, the office wifi password is walrus-4417."),
		msg("assistant", "Got it, I will remember the wifi password."))
	for i := 0; i < 80; i++ {
		ts.store(session, msg([]string{"user", "assistant"}[i%2], chatter(i)))
	}
	return ids
}

func TestContextRecoversRelevantColdTurns(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	fact := storeBuriedFact(ts, "r")
	var state string
	for _, m := range allMessages(ts, "r") {
		if m["id"] == fact[1] {
			state = m["state"].(string)
		}
	}
	if state == "active" {
		t.Fatal("setup: the fact was never compacted away")
	}
	prompt := "what is the office wifi password?"
	body := ts.mustDo(200, "POST", "/v1/sessions/r/context?explain=true", map[string]any{"prompt": prompt, "max_tokens": 800})
	msgs := body["messages"].([]any)
	found := false
	for _, x := range msgs {
		m := x.(map[string]any)
		if m["id"] == fact[1] {
			found = true
			if m["source"] != "recovered" || m["state"] != "recovered" || m["components"] == nil {
				t.Fatalf("recovered fact = %v", m)
			}
		}
	}
	if !found || !contains(toStrings(body["recovered"].([]any)), fact[1]) {
		t.Fatalf("the relevant cold turn was not recovered: %v", body["recovered"])
	}
	if recount(t, msgs, prompt) > 800 {
		t.Fatal("window over budget")
	}
	checkSequence(t, msgs)
	recs := readEvents(t, ts.Dir+"/logs/recoveries.jsonl")
	if len(recs) == 0 || recs[0]["prompt"] != prompt || recs[0]["score"] == nil {
		t.Fatalf("recoveries log = %v", recs)
	}
}

func toStrings(xs []any) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x.(string))
	}
	return out
}

func TestContextConflictsAndHardLimit(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.store("p", map[string]any{"role": "system", "content": strings.Repeat("rule ", 400), "pinned": true})
	r := ts.do("POST", "/v1/sessions/p/context", map[string]any{"prompt": "hi", "max_tokens": 100})
	if r.Status != 409 || r.errCode() != "conflict" {
		t.Fatalf("pinned over budget = %d %s", r.Status, r.Raw)
	}
	ts.mustDo(404, "POST", "/v1/sessions/none/context", map[string]any{"prompt": "hi"})
	if r := ts.do("POST", "/v1/sessions/p/context", map[string]any{"prompt": "hi", "max_tokens": -5}); r.Status != 400 {
		t.Fatalf("negative max_tokens = %d", r.Status)
	}

	// A window past the hard limit is compacted before the window is built.
	for i := 0; i < 40; i++ {
		ts.store("h", msg("user", chatter(i)))
	}
	ts.mustDo(200, "PUT", "/v1/sessions/h", map[string]any{"context_window": 1000})
	if st := ts.mustDo(200, "GET", "/v1/sessions/h", nil); st["state"] != "over_limit" {
		t.Fatalf("setup: state %v", st["state"])
	}
	ts.mustDo(200, "POST", "/v1/sessions/h/context", map[string]any{"prompt": "river walk"})
	st := ts.mustDo(200, "GET", "/v1/sessions/h", nil)
	if st["compactions"].(float64) < 1 || st["state"] == "over_limit" {
		t.Fatalf("after context at the hard limit: %v", st)
	}
}

// Recoveries move into the window only while it stays under the compaction
// trigger; the rest are sent answer-only (logged, left cold), so a context
// call never starts a compaction that would drop them again.
func TestContextRecoveriesStayUnderTrigger(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/u", map[string]any{"context_window": 2000})
	for i := 0; i < 120; i++ {
		ts.store("u", msg([]string{"user", "assistant"}[i%2], chatter(i)))
	}
	// Down to the compaction target, so that some recoveries fit under the
	// trigger and others do not (where ingest stops depends on scoring).
	ts.mustDo(200, "POST", "/v1/sessions/u/compact", map[string]any{})
	answerOnly, movedIn := 0, 0
	for i, prompt := range []string{chatter(3), chatter(40), chatter(77), chatter(101)} {
		before := ts.mustDo(200, "GET", "/v1/sessions/u", nil)
		body := ts.mustDo(200, "POST", "/v1/sessions/u/context", map[string]any{"prompt": prompt, "max_tokens": 900})
		if recount(t, body["messages"].([]any), prompt) > 900 {
			t.Fatalf("call %d: window over budget", i)
		}
		checkSequence(t, body["messages"].([]any))
		moved := map[string]bool{}
		for _, id := range toStrings(body["recovered"].([]any)) {
			moved[id] = true
		}
		states := map[string]string{}
		for _, m := range allMessages(ts, "u") {
			states[m["id"].(string)] = m["state"].(string)
		}
		for _, x := range body["messages"].([]any) {
			m := x.(map[string]any)
			id := m["id"].(string)
			switch {
			case moved[id]:
				movedIn++
				if m["state"] != "recovered" || states[id] != "recovered" {
					t.Fatalf("call %d: recovered %s has state %v (stored %s)", i, id, m["state"], states[id])
				}
			case m["source"] == "recovered":
				answerOnly++
				if !contains(toStrings(anyList(body["answer_only"])), id) {
					t.Fatalf("call %d: answer-only %s is not in the answer's answer_only", i, id)
				}
				if states[id] != "dropped" && states[id] != "summarized" || m["state"] != states[id] {
					t.Fatalf("call %d: answer-only %s has state %v (stored %s), want it cold", i, id, m["state"], states[id])
				}
			}
		}
		after := ts.mustDo(200, "GET", "/v1/sessions/u", nil)
		if after["compactions"] != before["compactions"] {
			t.Fatalf("call %d: the context call compacted (%v -> %v)", i, before["compactions"], after["compactions"])
		}
		if after["state"] == "compaction_due" || after["state"] == "over_limit" {
			t.Fatalf("call %d: recoveries carried the window to %v (%v tokens)", i, after["state"], after["tokens"])
		}
	}
	if answerOnly == 0 || movedIn == 0 {
		t.Fatalf("setup: %d recoveries moved in, %d answer-only; want both", movedIn, answerOnly)
	}
	// Every recovery is logged; the answer-only ones say so.
	logged, flagged := map[string]bool{}, 0
	for _, e := range readEvents(t, ts.Dir+"/logs/recoveries.jsonl") {
		logged[e["chunk"].(string)] = true
		if e["answer_only"] == true {
			flagged++
		}
	}
	if flagged != answerOnly {
		t.Fatalf("recoveries log flags %d answer-only lines, the answers sent %d", flagged, answerOnly)
	}
}

// anyList is v as a list, or none when v is absent (omitted when empty).
func anyList(v any) []any {
	l, _ := v.([]any)
	return l
}

// A turn recovered by one call is scored by the next at once, by its words
// and its vector: the index learns of the recovery a moment later, and the
// window's scoring must not wait for it (nor score the window by words only).
func TestContextScoresRecoveredTurnsAtOnce(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	fact := storeBuriedFact(ts, "r")
	prompt := "what is the office wifi password?"
	first := ts.mustDo(200, "POST", "/v1/sessions/r/context", map[string]any{"prompt": prompt, "max_tokens": 800})
	if !contains(toStrings(first["recovered"].([]any)), fact[1]) {
		t.Fatalf("setup: the fact was not moved back in: %v", first["recovered"])
	}
	second := ts.mustDo(200, "POST", "/v1/sessions/r/context?explain=true", map[string]any{"prompt": prompt, "max_tokens": 800})
	var got map[string]any
	for _, x := range second["messages"].([]any) {
		if m := x.(map[string]any); m["id"] == fact[1] {
			got = m
		}
	}
	if got == nil {
		t.Fatal("the recovered fact left the window on the next call")
	}
	c := got["components"].(map[string]any)
	if got["source"] != "working" || c["similarity"].(float64) < 0.5 {
		t.Fatalf("recovered fact on the next call: source %v, components %v; want working with a high similarity", got["source"], c)
	}
}

// With no word of the prompt in the window, the window is still ranked by
// meaning: the vector side of similarity is the messages' stored vectors.
func TestContextRanksWindowByMeaning(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/v", map[string]any{"context_window": 100_000, "keep_recent": 1})
	pet := ts.store("v", msg("user", "My puppy chewed through the sofa cushions while I was out."))
	for i := 0; i < 30; i++ {
		ts.store("v", msg([]string{"user", "assistant"}[i%2], chatter(i)))
	}
	prompt := "my dog wrecked the couch"
	body := ts.mustDo(200, "POST", "/v1/sessions/v/context?explain=true", map[string]any{"prompt": prompt, "max_tokens": 100})
	var sims []float64
	found := false
	for _, x := range body["messages"].([]any) {
		m := x.(map[string]any)
		if m["source"] == "recent" {
			continue
		}
		sims = append(sims, m["components"].(map[string]any)["similarity"].(float64))
		found = found || m["id"] == pet[0]
	}
	if !found {
		t.Fatalf("the turn about a puppy was not chosen for %q (similarities of those chosen: %v)", prompt, sims)
	}
}

// A session's only cold message is recovered when the prompt asks for it:
// with one candidate, similarity has nothing to scale against and scores 0,
// which the relevance cutoff must not read as irrelevant.
func TestContextRecoversTheOnlyColdMessage(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/one", map[string]any{"context_window": 100_000, "keep_recent": 1})
	ids := ts.store("one", msg("user", "hi there"), msg("user", "By the way, the office wifi password is walrus-4417."))
	for i := 0; i < 20; i++ {
		ts.store("one", msg([]string{"user", "assistant"}[i%2], chatter(i)))
	}
	// Drop the fact straight in the store, as a compaction would.
	dropInStore(t, ts, "one", ids[1])
	ts.store("one", msg("user", "one more turn, so the index catches up")) // a write syncs the index
	body := ts.mustDo(200, "POST", "/v1/sessions/one/context", map[string]any{"prompt": "what is the office wifi password?", "max_tokens": 300})
	for _, x := range body["messages"].([]any) {
		if m := x.(map[string]any); m["id"] == ids[1] {
			if m["source"] != "recovered" {
				t.Fatalf("the fact came back as %v", m["source"])
			}
			return
		}
	}
	t.Fatalf("the only cold message was not recovered: %v", body["budget"])
}

// A recovered turn brings its reply along, and when the reply asks back, the
// answer to that too: "How long have you been into it?" is answered by the
// turn after it, which shares no word with the prompt. A turn written days
// later is no reply and stays out.
func TestContextRecoversTheAnswerToAQuestionAskedBack(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/qa", map[string]any{"context_window": 100_000, "keep_recent": 1})
	day := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)
	at := func(role, content string, t time.Time) map[string]any {
		m := msg(role, content)
		m["created_at"] = t.Format(time.RFC3339)
		return m
	}
	ids := ts.store("qa",
		at("user", "How long have you been making pottery, Mel?", day),
		at("assistant", "Since I was seventeen or so. How long have you been into it?", day.Add(time.Minute)),
		at("user", "Seven years now, and I finally found my muse.", day.Add(2*time.Minute)),
		at("assistant", "Did you keep the pottery kiln you made pottery in for so long, Mel?", day.Add(3*time.Minute)),
		at("user", "Good morning! The parade outside was loud.", day.Add(50*time.Hour)))
	answer, nextDay := ids[2], ids[4]
	var cold []string
	cold = append(cold, ids...)
	for i := 0; i < 12; i++ {
		cold = append(cold, ts.store("qa", at("user", fmt.Sprintf("Decoy %d: pottery glaze, pottery wheels.", i), day.Add(60*time.Hour)))...)
	}
	for i := 0; i < 20; i++ {
		ts.store("qa", msg([]string{"user", "assistant"}[i%2], chatter(i)))
	}
	// Drop the conversation straight in the store, as a compaction would.
	dropInStore(t, ts, "qa", cold...)
	ts.store("qa", msg("user", "one more turn, so the index catches up")) // a write syncs the index
	body := ts.mustDo(200, "POST", "/v1/sessions/qa/context", map[string]any{"prompt": "How long has Mel been making pottery?", "max_tokens": 220})
	got := map[string]string{}
	for _, x := range body["messages"].([]any) {
		m := x.(map[string]any)
		got[m["id"].(string)] = m["source"].(string)
	}
	if got[ids[0]] != "recovered" || got[answer] != "recovered" {
		t.Fatalf("question %q, answer %q: want both recovered (window %v, budget %v)", got[ids[0]], got[answer], got, body["budget"])
	}
	if _, ok := got[nextDay]; ok {
		t.Fatalf("the turn written two days after the matched one came along: %v", got)
	}
}

// A prompt that asks when scores a turn that states a time up, and explain
// says so; a turn that states none gets nothing.
func TestContextWhenPromptScoresATurnThatStatesATime(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/w", map[string]any{"context_window": 100_000, "keep_recent": 1})
	ids := ts.store("w", msg("user", "I went to the pottery class with my sister, it was great fun."),
		msg("user", "I went to the pottery class with my sister last Saturday."))
	for i := 0; i < 30; i++ {
		ts.store("w", msg([]string{"user", "assistant"}[i%2], chatter(i)))
	}
	when := func(prompt string) map[string]any {
		body := ts.mustDo(200, "POST", "/v1/sessions/w/context?explain=true", map[string]any{"prompt": prompt, "max_tokens": 300})
		out := map[string]any{}
		for _, x := range body["messages"].([]any) {
			m := x.(map[string]any)
			if m["id"] == ids[0] || m["id"] == ids[1] {
				out[m["id"].(string)] = m["components"].(map[string]any)["when"]
			}
		}
		return out
	}
	got := when("When did I go to the pottery class with my sister?")
	if len(got) != 2 || got[ids[1]] != 1.0 || got[ids[0]] != nil {
		t.Fatalf("when components %v; want 1 for the dated turn %s only", got, ids[1])
	}
	if got := when("Who did I go to the pottery class with?"); len(got) != 2 || got[ids[1]] != nil {
		t.Fatalf("a prompt that does not ask when: when components %v, want none", got)
	}
}

// An active message the recent level did not take competes with the cold
// ones for the recovered level's share, on the same scores: the best
// answer to the prompt is shown whether it sits in the working window or
// in cold storage (LoCoMo evidence-in-window 86.2 -> 88.2). Here 30 cold
// turns mention the wifi and fill that share; the one that answers is
// active, older than the recent turns.
func TestContextRanksActiveTurnsWithColdOnes(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/mix", map[string]any{"context_window": 100_000, "keep_recent": 2})
	fact := ts.store("mix", msg("user", "By the way, the office wifi password is walrus-4417."))[0]
	var weak []string
	for i := range 30 {
		weak = append(weak, ts.store("mix", msg("user", fmt.Sprintf("The wifi at the cafe on day %d was slow again, so I read a book instead.", i)))...)
	}
	for i := range 4 {
		ts.store("mix", msg([]string{"user", "assistant"}[i%2], chatter(i)+" "+chatter(i+10)+" "+chatter(i+20)+" "+chatter(i+30)))
	}
	dropInStore(t, ts, "mix", weak...)
	ts.store("mix", msg("user", "one more turn, so the index catches up"))
	body := ts.mustDo(200, "POST", "/v1/sessions/mix/context", map[string]any{"prompt": "what is the office wifi password?", "max_tokens": 600})
	recovered, source := 0, ""
	for _, x := range body["messages"].([]any) {
		m := x.(map[string]any)
		if m["source"] == "recovered" {
			recovered++
		}
		if m["id"] == fact {
			source, _ = m["source"].(string)
		}
	}
	if recovered == 0 {
		t.Fatalf("setup: no cold turn was recovered: %v", body["budget"])
	}
	if source != "working" {
		t.Fatalf("the active turn that answers came as %q beside %d recovered cold turns: %v", source, recovered, body["budget"])
	}
}

// dropInStore moves messages to cold storage straight in the store, as a
// compaction would (the index learns of it with the next write).
func dropInStore(t *testing.T, ts *testServer, session string, ids ...string) {
	t.Helper()
	ctx := memory.NewContextWithTenant(t.Context(), memory.DefaultTenant)
	if _, err := ts.Main.Store.Update(ctx, memory.DefaultTenant, session, func(tx memory.SessionTx) error {
		for _, id := range ids {
			m, err := tx.Message(id)
			if err != nil {
				return err
			}
			m.State = memory.StateDropped
			m.Cold = &memory.ColdInfo{DropReason: memory.ReasonLowRelevance, DroppedAt: ts.now(), RecoverableUntil: ts.now().Add(time.Hour)}
			if err := tx.Put(m); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The answer says where the prefix it repeats from the session's previous
// window ends (stable_prefix) and how much of it the next window will
// repeat (stable_until), in both formats: a tool loop's next window is the
// last one plus the new step, so all of the last one repeats.
func TestContextStablePrefix(t *testing.T) {
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/sp", map[string]any{"context_window": 16000})
	ts.store("sp", map[string]any{"role": "system", "content": "You are a build assistant.", "pinned": true},
		msg("user", "Build the project."))
	var prev int
	for i, format := range []string{"ctxd", "openai", "ctxd"} {
		ts.store("sp", toolTurn(i, fmt.Sprintf("step %d compiled package_%d", i, i))...)
		body := ts.mustDo(200, "POST", "/v1/sessions/sp/context", map[string]any{"prompt": "next", "max_tokens": 4000, "format": format})
		got, ok := body["stable_prefix"].(float64)
		if !ok {
			t.Fatalf("call %d (%s): no stable_prefix in %v", i, format, body)
		}
		if int(got) != prev {
			t.Fatalf("call %d (%s): stable_prefix %v, want the previous window's %d messages", i, format, got, prev)
		}
		until, ok := body["stable_until"].(float64)
		if n := len(body["messages"].([]any)); !ok || int(until) != n {
			t.Fatalf("call %d (%s): stable_until %v, want the whole window's %d messages", i, format, body["stable_until"], n)
		}
		prev = int(until)
	}
}
