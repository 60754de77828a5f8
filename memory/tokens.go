package memory

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// Token accounting follows OpenAI's published rule for chat models
// (gpt-3.5-turbo-0613 and later, gpt-4, gpt-4o): every message costs
// MessageOverhead tokens plus the tokens of its role and content; a name adds
// its tokens plus NameOverhead. OpenAI does not publish the rule for
// tool_calls; ctxd counts each call's id, function name and arguments plus
// MessageOverhead, which tracks the API's reported usage within a few tokens
// per call. A completion request adds ReplyPriming tokens once, for the
// assistant turn the model is primed with; the window builder counts it.
const (
	MessageOverhead = 3
	NameOverhead    = 1
	ReplyPriming    = 3
)

// MessageTokens returns what m costs in a chat request, in encoding enc.
func MessageTokens(tok Tokenizer, enc string, m *Message) (int, error) {
	total := MessageOverhead
	add := func(s string) error {
		n, err := tok.Count(enc, s)
		if err != nil {
			return fmt.Errorf("count tokens: %w", err)
		}
		total += n
		return nil
	}
	for _, s := range []string{string(m.Role), m.Content, m.ToolCallID} {
		if err := add(s); err != nil {
			return 0, err
		}
	}
	if m.Name != "" {
		if err := add(m.Name); err != nil {
			return 0, err
		}
		total += NameOverhead
	}
	for _, tc := range m.ToolCalls {
		total += MessageOverhead
		for _, s := range []string{tc.ID, tc.Function.Name, tc.Function.Arguments} {
			if err := add(s); err != nil {
				return 0, err
			}
		}
	}
	return total, nil
}

// countTokens sets Tokens on every message, spreading the work over the
// cores: exact counting is the costliest step of a write (~150 us for a
// 60-word message), and one request's messages are independent. It stops
// between messages once ctx is done: the request timeout holds for a write
// of megabytes (8 messages of 1 MB took 16 s past a 1 s timeout).
func countTokens(ctx context.Context, tok Tokenizer, enc string, msgs []*Message) error {
	workers := min(runtime.GOMAXPROCS(0), (len(msgs)+15)/16)
	if workers <= 1 {
		for _, m := range msgs {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, err := MessageTokens(tok, enc, m)
			if err != nil {
				return err
			}
			m.Tokens = n
		}
		return nil
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(msgs); i += workers {
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				n, err := MessageTokens(tok, enc, msgs[i])
				if err != nil {
					errs[w] = err
					return
				}
				msgs[i].Tokens = n
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
