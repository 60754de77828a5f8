package openai

import (
	"slices"

	lru "github.com/hashicorp/golang-lru/v2"
)

// cacheMaxTextBytes: longer texts are not kept. What repeats is short: a
// search or a context call embeds its query or prompt (an agent asks for the
// same prompt's window again after each tool call, and a context call scores
// and searches with it), and the prompt is often the user message just
// written. Tool outputs of kilobytes seldom come back, and as keys they
// would cost more than their vectors.
const cacheMaxTextBytes = 4 << 10

// vectorCache keeps the vectors of recent short texts, least recently used
// out first, so a text embedded again costs no request. A nil cache keeps
// nothing. Safe for concurrent use; it holds copies, and hands out copies.
type vectorCache struct {
	lru *lru.Cache[string, []float32]
}

func newVectorCache(size int) *vectorCache {
	if size <= 0 {
		return nil
	}
	c, err := lru.New[string, []float32](size)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &vectorCache{c}
}

func (c *vectorCache) get(text string) []float32 {
	if c == nil || len(text) > cacheMaxTextBytes {
		return nil
	}
	v, _ := c.lru.Get(text)
	return slices.Clone(v)
}

func (c *vectorCache) add(text string, v []float32) {
	if c != nil && len(text) <= cacheMaxTextBytes {
		c.lru.Add(text, slices.Clone(v))
	}
}
