package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

func toolTurn(i int, output string) []api.MessageIn {
	id := fmt.Sprintf("call_%d", i)
	return []api.MessageIn{
		{Role: "assistant", ToolCalls: []memory.ToolCall{{ID: id, Type: "function",
			Function: memory.FunctionCall{Name: "run", Arguments: fmt.Sprintf(`{"step":%d}`, i)}}}},
		{Role: "tool", ToolCallID: id, Content: output},
	}
}

func maxTokens(n int) *int { return &n }

func TestContextExactBudgetAndValidSequence(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.putSession("c", map[string]any{"context_window": 200000})
	ts.store("c", api.MessageIn{Role: "system", Content: "You are a build assistant.", Pinned: true})
	for i := 0; i < 12; i++ {
		out := fmt.Sprintf("step %d ok\n", i) + strings.Repeat(fmt.Sprintf("log line %d: compiled package %d\n", i, i), 1+i*30)
		ts.store("c", append([]api.MessageIn{msg("user", fmt.Sprintf("run step %d of the build", i))}, toolTurn(i, out)...)...)
		ts.store("c", msg("assistant", fmt.Sprintf("step %d finished", i)))
	}
	for _, max := range []int{400, 1000, 2500, 8000, 60000} {
		prompt := "did step 3 compile package 3?"
		w := ts.context("c", "", api.ContextIn{Prompt: prompt, MaxTokens: maxTokens(max)})
		got := servertest.Recount(t, w.Messages, prompt)
		if got > max {
			t.Fatalf("max_tokens %d: window costs %d by exact recount", max, got)
		}
		if w.Tokens != got || w.Budget.Used != got {
			t.Fatalf("max_tokens %d: reported %v tokens, recount %d", max, w.Tokens, got)
		}
		servertest.CheckSequence(t, w.Messages)
		if w.Messages[0].Source != "pinned" {
			t.Fatalf("max_tokens %d: the pinned system prompt is not first", max)
		}
		for i := 1; i < len(w.Messages); i++ {
			if w.Messages[i].CreatedAt.Before(w.Messages[i-1].CreatedAt) {
				t.Fatalf("max_tokens %d: not chronological at %d", max, i)
			}
		}
	}
	// Old long tool output is pruned in the working window (the session's
	// tokens), but a tool loop's window shows the newest steps whole while
	// the caller's budget holds them: this one holds all twelve.
	w := ts.context("c", "", api.ContextIn{Prompt: "status", MaxTokens: maxTokens(150000)})
	whole := 0
	for _, m := range w.Messages {
		if strings.Contains(m.Content, "[tool result") || m.PruneLevel != 0 {
			t.Fatalf("a tool result is pruned in a window with room for it whole: %.80q", m.Content)
		}
		if m.Role == memory.RoleTool {
			whole++
		}
	}
	if whole != 12 {
		t.Fatalf("%d tool results in the window, want all 12", whole)
	}
	// A small budget keeps the current turn whole and the newest before it.
	small := ts.context("c", "", api.ContextIn{Prompt: "status", MaxTokens: maxTokens(2500)})
	if last := small.Messages[len(small.Messages)-1]; last.Content != "step 11 finished" {
		t.Fatalf("the newest message is not last in a small window: %v", last.Content)
	}
	raw := 0
	for _, m := range ts.allMessages("c") {
		raw += m.Tokens
		if strings.HasPrefix(m.Content, "[tool result") {
			t.Fatal("a stored original was modified by pruning")
		}
	}
	if st := ts.session("c"); st.Tokens >= raw {
		t.Fatalf("session tokens %v do not reflect pruning (stored %d)", st.Tokens, raw)
	}
	if got := servertest.Recount(t, small.Messages, "status"); got != small.Tokens {
		t.Fatalf("small window: reported %v, recount %d", small.Tokens, got)
	}
}

// storeBuriedFact stores a fact (the wifi password, ids[1]) and then enough
// chatter in a 2,000-token session for compaction to take the fact cold.
func storeBuriedFact(ts *testServer, session string) []string {
	ts.putSession(session, map[string]any{"context_window": 2000})
	ids := ts.store(session, msg("user", "hi there"), msg("user", "By the way, the office wifi password is walrus-4417."),
		msg("assistant", "Got it, I will remember the wifi password."))
	for i := 0; i < 80; i++ {
		ts.store(session, turn(i))
	}
	return ids
}

func TestContextRecoversRelevantColdTurns(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	fact := storeBuriedFact(ts, "r")
	var state memory.State
	for _, m := range ts.allMessages("r") {
		if m.ID == fact[1] {
			state = m.State
		}
	}
	if state == memory.StateActive {
		t.Fatal("setup: the fact was never compacted away")
	}
	prompt := "what is the office wifi password?"
	w := ts.context("r", "?explain=true", api.ContextIn{Prompt: prompt, MaxTokens: maxTokens(800)})
	found := false
	for _, m := range w.Messages {
		if m.ID == fact[1] {
			found = true
			if m.Source != "recovered" || m.State != memory.StateRecovered || m.Components == nil {
				t.Fatalf("recovered fact = %+v", m)
			}
		}
	}
	if !found || !slices.Contains(w.Recovered, fact[1]) {
		t.Fatalf("the relevant cold turn was not recovered: %v", w.Recovered)
	}
	if servertest.Recount(t, w.Messages, prompt) > 800 {
		t.Fatal("window over budget")
	}
	servertest.CheckSequence(t, w.Messages)
	recs := readEvents(t, ts.Dir+"/logs/recoveries.jsonl")
	if len(recs) == 0 || recs[0]["prompt"] != prompt || recs[0]["score"] == nil {
		t.Fatalf("recoveries log = %v", recs)
	}
}

func TestContextConflictsAndHardLimit(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.store("p", api.MessageIn{Role: "system", Content: strings.Repeat("rule ", 400), Pinned: true})
	r := ts.do("POST", "/v1/sessions/p/context", map[string]any{"prompt": "hi", "max_tokens": 100})
	if r.Status != 409 || r.errCode() != "conflict" {
		t.Fatalf("pinned over budget = %d %s", r.Status, r.Raw)
	}
	ts.call(404, "POST", "/v1/sessions/none/context", map[string]any{"prompt": "hi"}, nil)
	if r := ts.do("POST", "/v1/sessions/p/context", map[string]any{"prompt": "hi", "max_tokens": -5}); r.Status != 400 {
		t.Fatalf("negative max_tokens = %d", r.Status)
	}

	// A window past the hard limit is compacted before the window is built.
	for i := 0; i < 40; i++ {
		ts.store("h", msg("user", chatter(i)))
	}
	ts.putSession("h", map[string]any{"context_window": 1000})
	if st := ts.session("h"); st.State != "over_limit" {
		t.Fatalf("setup: state %v", st.State)
	}
	ts.context("h", "", api.ContextIn{Prompt: "river walk"})
	if st := ts.session("h"); st.Compactions < 1 || st.State == "over_limit" {
		t.Fatalf("after context at the hard limit: %+v", st)
	}
}

// Recoveries move into the window only while it stays under the compaction
// trigger; the rest are sent answer-only (logged, left cold), so a context
// call never starts a compaction that would drop them again.
func TestContextRecoveriesStayUnderTrigger(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.putSession("u", map[string]any{"context_window": 2000})
	for i := 0; i < 120; i++ {
		ts.store("u", turn(i))
	}
	// Down to the compaction target, so that some recoveries fit under the
	// trigger and others do not (where ingest stops depends on scoring).
	ts.call(200, "POST", "/v1/sessions/u/compact", map[string]any{}, nil)
	answerOnly, movedIn := 0, 0
	for i, prompt := range []string{chatter(3), chatter(40), chatter(77), chatter(101)} {
		before := ts.session("u")
		w := ts.context("u", "", api.ContextIn{Prompt: prompt, MaxTokens: maxTokens(900)})
		if servertest.Recount(t, w.Messages, prompt) > 900 {
			t.Fatalf("call %d: window over budget", i)
		}
		servertest.CheckSequence(t, w.Messages)
		states := map[string]memory.State{}
		for _, m := range ts.allMessages("u") {
			states[m.ID] = m.State
		}
		for _, m := range w.Messages {
			switch {
			case slices.Contains(w.Recovered, m.ID):
				movedIn++
				if m.State != memory.StateRecovered || states[m.ID] != memory.StateRecovered {
					t.Fatalf("call %d: recovered %s has state %v (stored %s)", i, m.ID, m.State, states[m.ID])
				}
			case m.Source == "recovered":
				answerOnly++
				if !slices.Contains(w.AnswerOnly, m.ID) {
					t.Fatalf("call %d: answer-only %s is not in the answer's answer_only", i, m.ID)
				}
				if states[m.ID] != memory.StateDropped && states[m.ID] != memory.StateSummarized || m.State != states[m.ID] {
					t.Fatalf("call %d: answer-only %s has state %v (stored %s), want it cold", i, m.ID, m.State, states[m.ID])
				}
			}
		}
		after := ts.session("u")
		if after.Compactions != before.Compactions {
			t.Fatalf("call %d: the context call compacted (%v -> %v)", i, before.Compactions, after.Compactions)
		}
		if after.State == "compaction_due" || after.State == "over_limit" {
			t.Fatalf("call %d: recoveries carried the window to %v (%v tokens)", i, after.State, after.Tokens)
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

// windowMessage is the message id of w, if w holds it.
func windowMessage(w *api.Context, id string) (api.WindowMessage, bool) {
	for _, m := range w.Messages {
		if m.ID == id {
			return m, true
		}
	}
	return api.WindowMessage{}, false
}

// A turn recovered by one call is scored by the next at once, by its words
// and its vector: the index learns of the recovery a moment later, and the
// window's scoring must not wait for it (nor score the window by words only).
func TestContextScoresRecoveredTurnsAtOnce(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	fact := storeBuriedFact(ts, "r")
	prompt := "what is the office wifi password?"
	first := ts.context("r", "", api.ContextIn{Prompt: prompt, MaxTokens: maxTokens(800)})
	if !slices.Contains(first.Recovered, fact[1]) {
		t.Fatalf("setup: the fact was not moved back in: %v", first.Recovered)
	}
	second := ts.context("r", "?explain=true", api.ContextIn{Prompt: prompt, MaxTokens: maxTokens(800)})
	got, ok := windowMessage(second, fact[1])
	if !ok {
		t.Fatal("the recovered fact left the window on the next call")
	}
	if c := got.Components; got.Source != "working" || c == nil || c.Similarity < 0.5 {
		t.Fatalf("recovered fact on the next call: source %v, components %+v; want working with a high similarity", got.Source, c)
	}
}

// With no word of the prompt in the window, the window is still ranked by
// meaning: the vector side of similarity is the messages' stored vectors.
func TestContextRanksWindowByMeaning(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.putSession("v", map[string]any{"context_window": 100_000, "keep_recent": 1})
	pet := ts.store("v", msg("user", "My puppy chewed through the sofa cushions while I was out."))
	for i := 0; i < 30; i++ {
		ts.store("v", turn(i))
	}
	prompt := "my dog wrecked the couch"
	w := ts.context("v", "?explain=true", api.ContextIn{Prompt: prompt, MaxTokens: maxTokens(100)})
	var sims []float64
	found := false
	for _, m := range w.Messages {
		if m.Source == "recent" {
			continue
		}
		sims = append(sims, m.Components.Similarity)
		found = found || m.ID == pet[0]
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
	ts.putSession("one", map[string]any{"context_window": 100_000, "keep_recent": 1})
	ids := ts.store("one", msg("user", "hi there"), msg("user", "By the way, the office wifi password is walrus-4417."))
	for i := 0; i < 20; i++ {
		ts.store("one", turn(i))
	}
	// Drop the fact straight in the store, as a compaction would.
	servertest.DropInStore(t, ts.Main.Store, ts.now(), "one", ids[1])
	ts.store("one", msg("user", "one more turn, so the index catches up")) // a write syncs the index
	w := ts.context("one", "", api.ContextIn{Prompt: "what is the office wifi password?", MaxTokens: maxTokens(300)})
	m, ok := windowMessage(w, ids[1])
	if !ok {
		t.Fatalf("the only cold message was not recovered: %+v", w.Budget)
	}
	if m.Source != "recovered" {
		t.Fatalf("the fact came back as %v", m.Source)
	}
}

// A recovered turn brings its reply along, and when the reply asks back, the
// answer to that too: "How long have you been into it?" is answered by the
// turn after it, which shares no word with the prompt. A turn written days
// later is no reply and stays out.
func TestContextRecoversTheAnswerToAQuestionAskedBack(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.putSession("qa", map[string]any{"context_window": 100_000, "keep_recent": 1})
	day := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)
	at := func(role, content string, t time.Time) api.MessageIn {
		m := msg(role, content)
		m.CreatedAt = t.Format(time.RFC3339)
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
		ts.store("qa", turn(i))
	}
	// Drop the conversation straight in the store, as a compaction would.
	servertest.DropInStore(t, ts.Main.Store, ts.now(), "qa", cold...)
	ts.store("qa", msg("user", "one more turn, so the index catches up")) // a write syncs the index
	w := ts.context("qa", "", api.ContextIn{Prompt: "How long has Mel been making pottery?", MaxTokens: maxTokens(220)})
	got := map[string]string{}
	for _, m := range w.Messages {
		got[m.ID] = m.Source
	}
	if got[ids[0]] != "recovered" || got[answer] != "recovered" {
		t.Fatalf("question %q, answer %q: want both recovered (window %v, budget %+v)", got[ids[0]], got[answer], got, w.Budget)
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
	ts.putSession("w", map[string]any{"context_window": 100_000, "keep_recent": 1})
	ids := ts.store("w", msg("user", "I went to the pottery class with my sister, it was great fun."),
		msg("user", "I went to the pottery class with my sister last Saturday."))
	for i := 0; i < 30; i++ {
		ts.store("w", turn(i))
	}
	// when is the when component of each of the two turns in the window.
	when := func(prompt string) map[string]float64 {
		w := ts.context("w", "?explain=true", api.ContextIn{Prompt: prompt, MaxTokens: maxTokens(300)})
		out := map[string]float64{}
		for _, m := range w.Messages {
			if m.ID == ids[0] || m.ID == ids[1] {
				out[m.ID] = m.Components.When
			}
		}
		return out
	}
	got := when("When did I go to the pottery class with my sister?")
	if len(got) != 2 || got[ids[1]] != 1.0 || got[ids[0]] != 0 {
		t.Fatalf("when components %v; want 1 for the dated turn %s only", got, ids[1])
	}
	if got := when("Who did I go to the pottery class with?"); len(got) != 2 || got[ids[1]] != 0 {
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
	ts.putSession("mix", map[string]any{"context_window": 100_000, "keep_recent": 2})
	fact := ts.store("mix", msg("user", "By the way, the office wifi password is walrus-4417."))[0]
	var weak []string
	for i := range 30 {
		weak = append(weak, ts.store("mix", msg("user", fmt.Sprintf("The wifi at the cafe on day %d was slow again, so I read a book instead.", i)))...)
	}
	for i := range 4 {
		ts.store("mix", msg([]string{"user", "assistant"}[i%2], chatter(i)+" "+chatter(i+10)+" "+chatter(i+20)+" "+chatter(i+30)))
	}
	servertest.DropInStore(t, ts.Main.Store, ts.now(), "mix", weak...)
	ts.store("mix", msg("user", "one more turn, so the index catches up"))
	w := ts.context("mix", "", api.ContextIn{Prompt: "what is the office wifi password?", MaxTokens: maxTokens(600)})
	recovered, source := 0, ""
	for _, m := range w.Messages {
		if m.Source == "recovered" {
			recovered++
		}
		if m.ID == fact {
			source = m.Source
		}
	}
	if recovered == 0 {
		t.Fatalf("setup: no cold turn was recovered: %+v", w.Budget)
	}
	if source != "working" {
		t.Fatalf("the active turn that answers came as %q beside %d recovered cold turns: %+v", source, recovered, w.Budget)
	}
}

// The answer says where the prefix it repeats from the session's previous
// window ends (stable_prefix) and how much of it the next window will
// repeat (stable_until), in both formats: a tool loop's next window is the
// last one plus the new step, so all of the last one repeats.
func TestContextStablePrefix(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.putSession("sp", map[string]any{"context_window": 16000})
	ts.store("sp", api.MessageIn{Role: "system", Content: "You are a build assistant.", Pinned: true},
		msg("user", "Build the project."))
	var prev int
	for i, format := range []string{"ctxd", "openai", "ctxd"} {
		ts.store("sp", toolTurn(i, fmt.Sprintf("step %d compiled package_%d", i, i))...)
		// The fields both formats share, and which the test reads.
		var w struct {
			Messages     []api.ChatMessage `json:"messages"`
			StablePrefix *int              `json:"stable_prefix"`
			StableUntil  *int              `json:"stable_until"`
		}
		r := ts.do("POST", "/v1/sessions/sp/context", api.ContextIn{Prompt: "next", MaxTokens: maxTokens(4000), Format: format})
		if r.Status != 200 || json.Unmarshal(r.Raw, &w) != nil {
			t.Fatalf("call %d (%s): %d %s", i, format, r.Status, r.Raw)
		}
		if w.StablePrefix == nil {
			t.Fatalf("call %d (%s): no stable_prefix in %s", i, format, r.Raw)
		}
		if *w.StablePrefix != prev {
			t.Fatalf("call %d (%s): stable_prefix %v, want the previous window's %d messages", i, format, *w.StablePrefix, prev)
		}
		if n := len(w.Messages); w.StableUntil == nil || *w.StableUntil != n {
			t.Fatalf("call %d (%s): stable_until %v, want the whole window's %d messages", i, format, w.StableUntil, n)
		}
		prev = *w.StableUntil
	}
}
