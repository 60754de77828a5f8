package scoring

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestAsksWhen(t *testing.T) {
	for prompt, want := range map[string]bool{
		"When did Teodor start his apprenticeship?":     true,
		"How long has Marisol been restoring boats?":    true,
		"What year did Corinne move?":                   true,
		"Which month was the recital?":                  true,
		"How many years has she painted?":               true,
		"What did Marisol restore?":                     false,
		"How many paintings did she sell?":              false,
		"Is the deploy done? how is it going":           false,
		"what is the time complexity of this function?": false, // "what is", not "what time"
	} {
		if got := AsksWhen(prompt); got != want {
			t.Errorf("AsksWhen(%q) = %v, want %v", prompt, got, want)
		}
	}
}

func TestStatesTime(t *testing.T) {
	for text, want := range map[string]bool{
		"The harbour master showed me the knots yesterday!":      true,
		"We sailed to the island last year for the regatta.":     true,
		"Eleven years now, and the hull still floats.":           true,
		"Last Fri I took my nephews to the rope museum.":         true,
		"The recital is in May.":                                  true,
		"We moved in 2019.":                                       true,
		"See you on Saturday":                                     true,
		"I may go to the store.":                                  false,
		"They march for rights.":                                  false,
		"The sun was out and we sat in the yard.":                 false,
		"Painting helps me express my feelings.":                  false,
	} {
		if got := StatesTime(text); got != want {
			t.Errorf("StatesTime(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestWhenBonusRanksATimeFirst(t *testing.T) {
	cands, docs := chat("I went to the rigging class and loved it.", "I went to the rigging class yesterday.")
	for i := range cands {
		cands[i].StatesTime = StatesTime(cands[i].Text)
	}
	p := DefaultParams
	off := mustScore(t, p, cands, docs, 1, time.Time{})
	p.WhenBonus = DefaultWhenBonus
	on := mustScore(t, p, cands, docs, 1, time.Time{})
	if off[1].Components.When != 0 || on[0].Components.When != 0 || on[1].Components.When != 1 {
		t.Fatalf("when components off %v on %v, want only the dated message's 1 with the bonus on", off, on)
	}
	if d := on[1].Total - off[1].Total; d < DefaultWhenBonus-1e-9 || d > DefaultWhenBonus+1e-9 {
		t.Fatalf("the dated message gained %v, want %v", d, DefaultWhenBonus)
	}
	if on[0].Total != off[0].Total {
		t.Fatalf("the undated message moved from %v to %v", off[0].Total, on[0].Total)
	}
	if line := Explain(on[1], p); !strings.Contains(line, fmt.Sprintf("+ %.2f*when 1", DefaultWhenBonus)) {
		t.Fatalf("Explain = %q, want the when bonus", line)
	}
	p.WhenBonus = 1.5
	if _, err := ScoreAll(p, cands, docs, 1, time.Time{}); err == nil || !strings.Contains(err.Error(), "when_bonus") {
		t.Fatalf("when_bonus 1.5: err %v", err)
	}
}
