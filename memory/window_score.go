package memory

import (
	"context"

	"github.com/ctxd/ctxd/scoring"
)

// scoreWindow scores the window's units against the prompt.
func (b *windowBuilder) scoreWindow(ctx context.Context) error {
	sp := b.params(b.pol.scoringParams())
	scores, err := b.s.scoreMessages(ctx, b.sess, sp, b.req.Prompt, b.qvec, b.window, b.window)
	if err != nil {
		return err
	}
	for id, sc := range scores {
		b.scores[id] = sc
	}
	for _, u := range b.units {
		u.score = unitScore(u, scores, sp.WhenBonus)
	}
	return nil
}

// params are sp for this prompt: a prompt that asks when favours the
// messages that state a time, the kind of thing that answers it.
func (b *windowBuilder) params(sp scoring.Params) scoring.Params {
	if scoring.AsksWhen(b.req.Prompt) {
		sp.WhenBonus = scoring.DefaultWhenBonus
	}
	return sp
}
