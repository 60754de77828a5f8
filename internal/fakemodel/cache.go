package fakemodel

import "encoding/json"

// Prompt cache rules as the providers document them: OpenAI caches a
// prompt's prefix by itself from 1,024 tokens on, in steps of 128;
// Anthropic writes the prefix up to each cache_control breakpoint (from
// 1,024 tokens on) and reads a written prefix when one of the request's
// breakpoints falls at most 20 blocks after its end. Each counts what the
// previous request of the same conversation left in the cache. They are
// exported for ctxd-bench's gateway replay, whose model reports its cache
// by the same rules.
const (
	MinCachedPrefix   = 1024
	OpenAICacheStep   = 128
	AnthropicLookback = 20
)

// OpenAICached is what OpenAI reads from its cache of a prompt that
// repeats shared tokens of the previous request from its start: whole
// steps, none under the minimum.
func OpenAICached(shared int) int {
	if shared < MinCachedPrefix {
		return 0
	}
	return shared / OpenAICacheStep * OpenAICacheStep
}

// CacheSegment is one block of a prompt as Anthropic's cache sees it.
type CacheSegment struct {
	Tokens     int
	Breakpoint bool // the block carries cache_control
}

// AnthropicCached is what Anthropic reads from its cache of cur after
// prev, whose first common blocks cur repeats (the prefixes prev's
// breakpoints wrote, found from one of cur's breakpoints), and what cur
// writes: the prefix up to its last breakpoint, less what was read.
func AnthropicCached(prev, cur []CacheSegment, common int) (read, written int) {
	prefix := func(n int) int {
		t := 0
		for _, s := range cur[:n] {
			t += s.Tokens
		}
		return t
	}
	for p := min(common, len(prev)) - 1; p >= 0 && read == 0; p-- {
		if !prev[p].Breakpoint {
			continue
		}
		for b := p; b < len(cur) && b <= p+AnthropicLookback; b++ {
			if cur[b].Breakpoint {
				if n := prefix(p + 1); n >= MinCachedPrefix {
					read = n
				}
				break
			}
		}
	}
	for b := len(cur) - 1; b >= 0; b-- {
		if cur[b].Breakpoint {
			if n := prefix(b + 1); n >= MinCachedPrefix && n > read {
				written = n - read
			}
			break
		}
	}
	return read, written
}

// commonPrefix is how many leading segments the previous request and
// this one share.
func commonPrefix(prev, cur []segment) int {
	n := 0
	for n < len(prev) && n < len(cur) && prev[n].text == cur[n].text {
		n++
	}
	return n
}

func cacheSegments(segs []segment) []CacheSegment {
	out := make([]CacheSegment, len(segs))
	for i, s := range segs {
		out[i] = CacheSegment{Tokens: s.tokens, Breakpoint: s.breakpoint}
	}
	return out
}

// AnthropicBlock is a content block of a Messages request, as the model
// reads it; exported, with AnthropicBlocks, for the gateway replay's model.
type AnthropicBlock = anthBlock

// AnthropicBlocks reads a content field: a string is one text block.
func AnthropicBlocks(raw json.RawMessage) []AnthropicBlock { return blocks(raw) }

// Said is what a block says: its text, a tool call's name and input, a
// tool result's content.
func (b anthBlock) Said() string { return b.text() }
