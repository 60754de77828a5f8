package memory

import "testing"

func TestBudgetStates(t *testing.T) {
	t.Parallel()
	b := DefaultPolicy.Budget() // trigger .5, hard limit .85, flush 4000 tokens before the trigger
	for _, c := range []struct {
		tokens, window int
		want           string
	}{
		{100, 4096, WindowOK}, // a small window is not flush_due from its first message
		{1535, 4096, WindowOK},
		{1536, 4096, WindowFlushDue}, // a quarter of the way before the 2048 trigger
		{2048, 4096, WindowCompactionDue},
		{3482, 4096, WindowOverLimit},
		{59_999, 128_000, WindowOK},
		{60_000, 128_000, WindowFlushDue}, // 4000 before the 64k trigger
		{64_000, 128_000, WindowCompactionDue},
		{108_800, 128_000, WindowOverLimit},
		{5, 0, WindowOK},
	} {
		if got := b.State(c.tokens, c.window); got != c.want {
			t.Errorf("State(%d, %d) = %s, want %s", c.tokens, c.window, got, c.want)
		}
	}
}
