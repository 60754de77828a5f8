package httpapi

import (
	"encoding/json"

	"github.com/ctxd/ctxd/memory"
)

// Prompt caching through the gateway. Anthropic serves a prefix from its
// cache up to a cache_control breakpoint (at most four per request);
// OpenAI caches exact prefixes by itself, routed by prompt_cache_key. ctxd
// keeps the client's breakpoints and adds one where its window stops
// repeating the previous call's (memory.GatewayWindow.StablePrefix), or at
// the end of the system prompt while that is unknown.

// maxBreakpoints is Anthropic's limit of cache_control blocks per request.
const maxBreakpoints = 4

var ephemeral = json.RawMessage(`{"type":"ephemeral"}`)

// placeBreakpoint keeps the request's breakpoints within the limit
// (dropping the oldest message ones when over it) and, when one is free,
// puts ctxd's at the end of the window's stable prefix. system is the
// system prompt's blocks as they will be sent; at is where each window
// message's last block went.
func (f *anthropicFormat) placeBreakpoint(out map[string]json.RawMessage, system []json.RawMessage, turns []anthropicTurn, w *memory.GatewayWindow, at [][2]int) error {
	var tools []json.RawMessage
	if raw, ok := out["tools"]; ok && json.Unmarshal(raw, &tools) != nil {
		tools = nil
	}
	count := 0
	for _, list := range [][]json.RawMessage{tools, system} {
		for _, b := range list {
			if hasBreakpoint(b) {
				count++
			}
		}
	}
	for _, t := range turns {
		for _, b := range t.Content {
			if hasBreakpoint(b) {
				count++
			}
		}
	}
	for ti := 0; ti < len(turns) && count > maxBreakpoints; ti++ {
		for bi, b := range turns[ti].Content {
			if count > maxBreakpoints && hasBreakpoint(b) {
				turns[ti].Content[bi] = setBreakpoint(b, nil)
				count--
			}
		}
	}
	if count >= maxBreakpoints {
		return nil
	}
	if n := w.StablePrefix; n > 0 && n <= len(at) && at[n-1][0] >= 0 {
		t, b := at[n-1][0], at[n-1][1]
		block := turns[t].Content[b]
		if !hasBreakpoint(block) && cacheable(block) {
			turns[t].Content[b] = setBreakpoint(block, ephemeral)
		}
		return nil
	}
	// No stable prefix known: the system prompt's end, the one prefix
	// that repeats on every call.
	if n := len(system); n > 0 && !anyBreakpoint(system) {
		system[n-1] = setBreakpoint(system[n-1], ephemeral)
		b, err := json.Marshal(system)
		if err != nil {
			return err
		}
		out["system"] = b
	}
	return nil
}

func anyBreakpoint(blocks []json.RawMessage) bool {
	for _, b := range blocks {
		if hasBreakpoint(b) {
			return true
		}
	}
	return false
}

func hasBreakpoint(block json.RawMessage) bool {
	var b struct {
		CacheControl json.RawMessage `json:"cache_control"`
	}
	return json.Unmarshal(block, &b) == nil && len(b.CacheControl) > 0 && string(b.CacheControl) != "null"
}

// cacheable reports whether a block may carry a breakpoint: thinking
// blocks may not.
func cacheable(block json.RawMessage) bool {
	var b struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(block, &b) == nil && b.Type != "thinking" && b.Type != "redacted_thinking" && b.Type != ""
}

// setBreakpoint sets (cc nil: removes) a block's cache_control; the rest
// of the block is kept as it was.
func setBreakpoint(block, cc json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(block, &m) != nil {
		return block
	}
	if cc == nil {
		delete(m, "cache_control")
	} else {
		m["cache_control"] = cc
	}
	b, err := json.Marshal(m)
	if err != nil {
		return block
	}
	return b
}

// cacheKey gives an OpenAI request the session as its prompt_cache_key
// when the client named none: the provider routes a conversation's calls
// to the same cache by it.
func cacheKey(out map[string]json.RawMessage, w *memory.GatewayWindow) {
	if _, ok := out["prompt_cache_key"]; !ok {
		out["prompt_cache_key"], _ = json.Marshal("ctxd-" + w.Session)
	}
}
