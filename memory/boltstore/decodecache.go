package boltstore

import (
	"bytes"
	"maps"
	"slices"
	"sync"
	"unsafe"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// decodeCache keeps decoded message records by their key, each with the
// record's bytes: a hit is a record whose bytes are still exactly those, so
// it cannot be stale whatever was written meanwhile. A context call reads
// its session's whole window every time, and decoding its JSON was a
// sixth of the call's CPU and of what it allocated.
//
// Two generations approximate LRU at the cost of two maps: entries are
// added to the current one; a hit in the previous one moves the entry up;
// when the current one is full it becomes the previous one and the old
// previous one is dropped.
type decodeCache struct {
	mu         sync.Mutex
	cur, prev  map[string]*decoded
	curBytes   int
	limitBytes int // of entryBytes per generation
}

type decoded struct {
	raw  []byte
	m    *memory.Message // never handed out: callers get copies
	size int             // entryBytes
}

// DefaultDecodeCacheBytes bounds each generation by what its entries hold,
// the record and the decoded message (entryBytes, about 1.8 KB for a chat
// turn with its record), so the cache holds at most twice that. 32 MiB (with
// scoring's term cache at 32 MiB too) held enough of a bench of 100
// sessions' windows of 1,000 messages (~170 MB decoded) that a context
// call took 15% less CPU than at 16 MiB, for ~100 MB more RSS; 64 MiB
// gained little more. See Store.SetDecodeCacheBytes.
const DefaultDecodeCacheBytes = 32 << 20

func newDecodeCache(limit int) *decodeCache {
	return &decodeCache{cur: map[string]*decoded{}, prev: map[string]*decoded{}, limitBytes: limit}
}

// decoder is a recordDecoder of tx's records through the cache.
func (c *decodeCache) decoder(tx *bolt.Tx) recordDecoder {
	return func(k, v []byte) (*memory.Message, error) { return c.decode(tx, k, v) }
}

// decode returns the message stored at key as raw in tx, from the cache
// when raw is what was cached for key. A record names its kept-apart
// prompt by the hash of its text, so equal bytes still mean an equal
// message.
func (c *decodeCache) decode(tx *bolt.Tx, key, raw []byte) (*memory.Message, error) {
	if m := c.get(key, raw); m != nil {
		return m, nil
	}
	m, err := decodeMessage(tx, key, raw)
	if err != nil {
		return nil, err
	}
	c.put(key, raw, cloneMessage(m))
	return m, nil
}

// get compares and copies outside the lock (an entry never changes once
// cached): every record any request reads passes here, a context call's
// whole window, so the lock is held for the lookup alone.
func (c *decodeCache) get(key, raw []byte) *memory.Message {
	c.mu.Lock()
	d, ok := c.cur[string(key)]
	if !ok {
		if d, ok = c.prev[string(key)]; ok {
			delete(c.prev, string(key))
			c.add(string(key), d)
		}
	}
	c.mu.Unlock()
	if !ok || !bytes.Equal(d.raw, raw) {
		return nil
	}
	return cloneMessage(d.m)
}

func (c *decodeCache) put(key, raw []byte, m *memory.Message) {
	size := entryBytes(key, raw, m)
	if size > c.limitBytes/64 {
		// One huge record would push out many small ones; and a window's
		// megabyte-long messages, cached, would add their size to the RSS
		// of the write that brought them (512 KiB at the default).
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.cur[string(key)]; ok {
		c.curBytes -= old.size
	}
	c.add(string(key), &decoded{raw: bytes.Clone(raw), m: m, size: size})
}

// add puts d in the current generation, first turning a full one into the
// previous one; c.mu is held.
func (c *decodeCache) add(key string, d *decoded) {
	if c.curBytes+d.size > c.limitBytes {
		c.prev, c.cur, c.curBytes = c.cur, map[string]*decoded{}, 0
	}
	c.cur[key] = d
	c.curBytes += d.size
}

// entryOverhead is, roughly, what an entry costs besides its bytes and
// strings: the map's slot and key header, the decoded struct, the message
// struct and the allocators' rounding.
const entryOverhead = 64 + int(unsafe.Sizeof(decoded{})+unsafe.Sizeof(memory.Message{}))

// entryBytes is what caching m, decoded from raw at key, holds in memory,
// so that the limit bounds the cache's memory, not only its records' (a
// compressed record decodes to several times its size).
func entryBytes(key, raw []byte, m *memory.Message) int {
	n := entryOverhead + len(key) + len(raw) + len(m.ID) + len(m.Tenant) + len(m.SessionID) + len(m.Role) +
		len(m.Content) + len(m.Name) + len(m.ToolCallID) + len(m.State) + len(m.Kind) + len(m.ClientID) + len(m.VersionOf)
	for _, tc := range m.ToolCalls {
		n += int(unsafe.Sizeof(tc)) + len(tc.ID) + len(tc.Type) + len(tc.Function.Name) + len(tc.Function.Arguments)
	}
	for _, ids := range [][]string{m.Sources, m.Versions} {
		for _, s := range ids {
			n += 16 + len(s)
		}
	}
	if m.Cold != nil {
		n += int(unsafe.Sizeof(*m.Cold)) + len(m.Cold.DropReason) + len(m.Cold.PromptAtDrop)
	}
	if m.Prune != nil {
		n += int(unsafe.Sizeof(*m.Prune))
	}
	return n + jsonBytes(m.Metadata)
}

// jsonBytes estimates what a value decoded from JSON into an any holds.
func jsonBytes(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 48
		for k, x := range v {
			n += 32 + len(k) + jsonBytes(x)
		}
		return n
	case []any:
		n := 24
		for _, x := range v {
			n += 16 + jsonBytes(x)
		}
		return n
	case string:
		return len(v)
	default:
		return 8
	}
}

// cloneMessage copies m deeply enough that changing the copy, its cold and
// prune records, tool calls, sources, versions or metadata leaves m as it was. The
// vector is not copied: cached messages have none (it is read apart).
func cloneMessage(m *memory.Message) *memory.Message {
	c := *m
	if m.Cold != nil {
		cold := *m.Cold
		c.Cold = &cold
	}
	if m.Prune != nil {
		p := *m.Prune
		c.Prune = &p
	}
	c.ToolCalls = slices.Clone(m.ToolCalls)
	c.Sources = slices.Clone(m.Sources)
	c.Versions = slices.Clone(m.Versions)
	if m.Metadata != nil {
		c.Metadata = cloneJSON(m.Metadata).(map[string]any)
	}
	return &c
}

// cloneJSON deep-copies a value decoded from JSON into an any.
func cloneJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := maps.Clone(v)
		for k, x := range out {
			out[k] = cloneJSON(x)
		}
		return out
	case []any:
		out := slices.Clone(v)
		for i, x := range out {
			out[i] = cloneJSON(x)
		}
		return out
	default:
		return v // string, float64, bool, nil: values
	}
}
