// Package benchsample writes a small synthetic benchmark in the shapes
// ctxd-bench's evals read, so that a clone of the repository runs
// `make eval` and `make eval-agent` (and the tests replay agent runs)
// without the real data: LoCoMo's turns.jsonl and questions.jsonl
// (conversations between two friends over dated sessions, questions with
// their evidence turns), and recorded tool-loop agent runs (runs.jsonl).
// Its figures check that the commands work; they say nothing about ctxd's
// quality, which LoCoMo and real agent runs measure.
package benchsample

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Where Write writes, under Options.Out.
const (
	LoCoMoDir     = "locomo"
	AgentRunsFile = "agent/runs.jsonl"
)

// Options sizes the sample; Defaults is what `ctxd-bench sample` writes.
type Options struct {
	Out           string
	Seed          uint64
	Conversations int
	Sessions      int // per conversation
	Turns         int // per session
	Runs          int // agent runs
	Steps         int // tool calls per agent run
}

// Defaults: 2 conversations of 112 turns (36 questions), 2 agent runs of
// 30 tool calls that outgrow a 16,000-token window.
var Defaults = Options{Seed: 1, Conversations: 2, Sessions: 8, Turns: 14, Runs: 2, Steps: 30}

// Validate checks the sizes: the multi-hop question joins the first two
// sessions, and a fact sits between a session's first and last turns.
func (o Options) Validate() error {
	if o.Out == "" || o.Conversations < 1 || o.Sessions < 2 || o.Turns < 4 || o.Runs < 1 || o.Steps < 8 {
		return fmt.Errorf("sample: a directory, and at least 1 conversation of 2 sessions of 4 turns and 1 run of 8 steps")
	}
	return nil
}

// Write writes the sample's three files under o.Out.
func Write(o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5a3b1e))
	var turns, questions []any
	for c := range o.Conversations {
		t, q := sampleConversation(rng, fmt.Sprintf("conv-s%d", c+1), len(questions), o.Sessions, o.Turns)
		turns, questions = append(turns, t...), append(questions, q...)
	}
	var runs []any
	for r := range o.Runs {
		runs = append(runs, AgentRun(rng, fmt.Sprintf("sample-run-%d", r+1), o.Steps))
	}
	for path, lines := range map[string][]any{
		filepath.Join(o.Out, LoCoMoDir, "turns.jsonl"):     turns,
		filepath.Join(o.Out, LoCoMoDir, "questions.jsonl"): questions,
		filepath.Join(o.Out, AgentRunsFile):                runs,
	} {
		if err := writeJSONLines(path, lines); err != nil {
			return err
		}
	}
	return nil
}

func writeJSONLines(path string, lines []any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// A fact one friend tells: said in a turn, asked about later. %s is the
// object, named in the answer.
type sampleFact struct {
	said, question, when string
	objects              []string
}

var sampleFacts = []sampleFact{
	{"Guess what, I adopted a puppy and named her %s!", "What did %s name the puppy?", "When did %s adopt the puppy?", []string{"Biscuit", "Pepper", "Maple", "Juniper"}},
	{"I just got back from a week in %s, the food was amazing.", "Which city did %s travel to for a week?", "When did %s come back from a trip?", []string{"Lisbon", "Kyoto", "Oaxaca", "Tbilisi"}},
	{"I signed up for %s lessons on Tuesday evenings.", "What lessons did %s sign up for?", "When did %s sign up for lessons?", []string{"cello", "pottery", "climbing", "salsa"}},
	{"I started a new job as a %s at the hospital.", "What job did %s start at the hospital?", "When did %s start a new job?", []string{"pharmacist", "radiographer", "dietitian", "paramedic"}},
	{"My book club is reading %s this month.", "Which book is %s's book club reading?", "When did %s talk about the book club?", []string{"Middlemarch", "Beloved", "Solaris", "Rebecca"}},
	{"We painted the kitchen %s over the weekend.", "What colour did %s paint the kitchen?", "When did %s paint the kitchen?", []string{"teal", "saffron", "sage", "terracotta"}},
}

var sampleChat = []string{
	"How have you been lately?", "That sounds lovely, tell me more.", "Work has been busy but fine.",
	"I slept in on Sunday and it was wonderful.", "The weather finally turned warm here.",
	"Did you watch the game last night?", "I have been trying to cook more at home.",
	"My sister says hi, by the way.", "I should really call my parents more often.",
	"Coffee with you is always the best part of my week.", "Haha, that is so you.",
	"I am thinking about redoing the garden.", "The traffic this morning was unbelievable.",
}

// sampleConversation is one conversation's turns and questions: each
// session (a week apart) has one fact turn among chit-chat, asked about
// by a single-hop and a temporal question; a multi-hop question joins two
// facts; an adversarial one asks about a fact never told.
func sampleConversation(rng *rand.Rand, conv string, qid, sessions, perSession int) (turns, questions []any) {
	speakers := [2]string{"Ada", "Noor"}
	if strings.HasSuffix(conv, "2") {
		speakers = [2]string{"Iris", "Tomas"}
	}
	start := time.Date(2023, time.March, 4, 15, 0, 0, 0, time.UTC)
	question := func(q, answer, cat string, catNum int, evidence ...string) {
		questions = append(questions, map[string]any{"qid": qid, "conv_id": conv, "q_index": len(questions),
			"question": q, "answer": answer, "category": catNum, "category_name": cat,
			"adversarial": cat == "adversarial", "evidence": append([]string{}, evidence...)})
		qid++
	}
	var told []string // fact turn ids, for the multi-hop question
	var tellers []string
	for s := range sessions {
		when := start.AddDate(0, 0, 7*s)
		date := when.Format("3:04 pm on 2 January, 2006")
		factAt := 1 + rng.IntN(perSession-2)
		fact := sampleFacts[(s+len(conv))%len(sampleFacts)]
		object := fact.objects[rng.IntN(len(fact.objects))]
		for i := range perSession {
			speaker := speakers[i%2]
			text := sampleChat[rng.IntN(len(sampleChat))] + " " + sampleChat[rng.IntN(len(sampleChat))]
			id := fmt.Sprintf("D%d:%d", s+1, i+1)
			if i == factAt {
				text = fmt.Sprintf(fact.said, object)
				question(fmt.Sprintf(fact.question, speaker), object, "single-hop", 1, id)
				question(fmt.Sprintf(fact.when, speaker), when.Format("2 January 2006"), "temporal", 2, id)
				told, tellers = append(told, id), append(tellers, speaker)
			}
			turns = append(turns, map[string]any{"conv_id": conv, "session": s + 1, "session_date_time": date,
				"session_ts": when.Format("2006-01-02T15:04:05"), "turn_index": len(turns), "turn_id": id,
				"speaker": speaker, "text": text, "raw_text": text, "img_caption": nil})
		}
	}
	question(fmt.Sprintf("What did %s and %s tell each other about in their first two meetings?", speakers[0], speakers[1]),
		"", "multi-hop", 3, told[0], told[1])
	question(fmt.Sprintf("What did %s name the parrot?", tellers[0]), "", "adversarial", 5)
	return turns, questions
}

// AgentRun is a tool loop in the recorded runs' format: the agent
// greps, reads files (long outputs that fill the window) and edits, and
// its later turns name functions and paths first seen many messages back,
// which is what the replay measures.
func AgentRun(rng *rand.Rand, id string, steps int) map[string]any {
	modules := []string{"billing/ledger.py", "billing/invoice_rules.py", "core/config_loader.py", "core/retry_policy.py"}
	funcs := []string{"compute_late_fee", "apply_discount_rules", "load_config_value", "backoff_with_jitter",
		"round_half_even", "parse_due_date", "merge_overrides", "validate_currency_code"}
	msgs := []map[string]any{
		{"role": "system", "content": "You are a coding agent. Run one shell command per turn with the bash tool."},
		{"role": "user", "content": "Invoices due on a weekend get a late fee a day early. Fix it and add a test."},
	}
	for i := range steps {
		call := fmt.Sprintf("call_%d", i+1)
		mod, fn := modules[rng.IntN(len(modules))], funcs[rng.IntN(len(funcs))]
		var thought, command, output string
		switch {
		case i%4 == 0:
			thought, command = "Find where "+fn+" is used.", "grep -rn "+fn+" ."
			output = fmt.Sprintf("./%s:%d:def %s(invoice, today):\n./tests/test_%s:%d:    assert %s(inv, day) == 0",
				mod, 10+rng.IntN(90), fn, filepath.Base(mod), 5+rng.IntN(40), fn)
		case i%4 == 3 && i > 8:
			// uses names read more than six messages back
			old := funcs[(i/4)%len(funcs)]
			thought = fmt.Sprintf("%s must call %s before %s in %s.", fn, old, funcs[(i/4+1)%len(funcs)], mod)
			command = fmt.Sprintf("sed -i 's/%s(/%s(/' %s", old, old, mod)
			output = ""
		default:
			thought, command = "Read "+mod+".", "cat "+mod
			output = sampleSource(rng, fn, 120+rng.IntN(120))
		}
		args, _ := json.Marshal(map[string]string{"command": command})
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "THOUGHT: " + thought, "tool_calls": []map[string]any{
				{"id": call, "type": "function", "function": map[string]any{"name": "bash", "arguments": string(args)}}}},
			map[string]any{"role": "tool", "tool_call_id": call, "content": output})
	}
	return map[string]any{"id": id, "source": "ctxd-bench sample", "messages": msgs, "submission_files": []string{modules[0]}}
}

// sampleSource is lines of Python-looking code around fn.
func sampleSource(rng *rand.Rand, fn string, lines int) string {
	vars := []string{"amount", "due", "rate", "invoice", "today", "days_late", "fee", "currency"}
	var b strings.Builder
	fmt.Fprintf(&b, "def %s(invoice, today):\n", fn)
	for i := range lines {
		a, c := vars[rng.IntN(len(vars))], vars[rng.IntN(len(vars))]
		fmt.Fprintf(&b, "    %s = %s * %d + %s  # step %d\n", a, c, rng.IntN(100), vars[rng.IntN(len(vars))], i)
	}
	b.WriteString("    return fee\n")
	return b.String()
}
