package httpapi

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"io"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"
)

// An agent's next call resends the list its last call sent (its history)
// with a few elements more. Scanning the whole body on every call made the
// gateway's time per call grow with the session: 20 ms of jsontext's
// scanning for the 8.7 MB body of a 1,000-step session, where the first
// calls took a few. listCache remembers each recent call's list as sent;
// the part of the next call's list that repeats it byte for byte was
// scanned (and found valid) then, and only what follows it is scanned.

// seenList is one call's list as sent: body is that call's whole body
// (kept, not copied: nothing changes a request's body once read), the list
// starting at start, its elements ending at ends (offsets in body).
type seenList struct {
	body   []byte
	start  int
	starts []int
	ends   []int
	id     uint64 // the call's, unique in the process
	// decoded is what the call's elements decoded to, one per element, set
	// once its handler has read them all (nil before): the next call of
	// the conversation takes its repeated elements from here, without
	// hashing, comparing or decoding them again.
	decoded atomic.Pointer[[]*decodedMessage]
}

// bytes is the list from its '[' to the end of its first k elements.
func (l *seenList) prefix(k int) []byte { return l.body[l.start:l.ends[k-1]] }

// maxListBytes bounds the bodies listCache keeps; when full it starts over
// (each conversation's next call scans its body once more).
const maxListBytes = 64 << 20

// listCache holds the lists of recent calls by their opening: the list
// through its first two elements (the system prompt and the first request,
// which stay the same on every call of one conversation). Two
// conversations that open alike share an entry; the one that called last
// has it, the other scans whole.
type listCache struct {
	mu      sync.Mutex
	entries map[uint64]*seenList
	size    int
	// resumed counts the calls read from where a recent call's list
	// stopped repeating.
	resumed atomic.Int64
}

// listIDs gives recorded lists their ids: one counter for every server of
// the process, so that servers sharing a gateway never give one id twice.
var listIDs atomic.Uint64

var listSeed = maphash.MakeSeed()

// keyed is the number of leading elements a list's key covers.
const keyed = 2

func listKey(name string, opening []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(listSeed)
	h.WriteString(name)
	h.WriteByte(0)
	h.Write(opening)
	return h.Sum64()
}

func (c *listCache) get(key uint64) *seenList {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[key]
}

func (c *listCache) put(key uint64, l *seenList) {
	if c == nil || len(l.body) > maxListBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || c.size+len(l.body) > maxListBytes {
		c.entries, c.size = map[uint64]*seenList{}, 0
	}
	if old := c.entries[key]; old != nil {
		c.size -= len(old.body)
	}
	c.entries[key] = l
	c.size += len(l.body)
}

// repeated answers how many leading elements of the list starting at
// body[start] are those of seen, byte for byte (0: fewer than keyed). A
// conversation that only grew repeats all of them; one that changed an
// element (an edit, a trimmed output) repeats those before it, found by
// halving.
func (l *seenList) repeated(body []byte, start int) int {
	same := func(k int) bool {
		p := l.prefix(k)
		return len(body)-start >= len(p) && bytes.Equal(body[start:start+len(p)], p)
	}
	n := len(l.ends)
	if same(n) {
		return n
	}
	if n <= keyed || !same(keyed) {
		return 0
	}
	lo, hi := keyed, n-1 // same(lo) holds; the answer is in [lo, hi]
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if same(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// isSpace reports JSON's whitespace.
func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// splitAfter reads the rest of a body whose list (member list, starting at
// start) has been read up to at, just past the element that ends last in
// ends: its further elements (their offsets appended to starts and ends),
// its end, and the members after it, which it adds to raw. It reads them as the member "" of an object made of `{"":[` and
// what follows the separator at, which is valid exactly when the rest of
// the body is; a "" member after the list, a duplicate there, is refused
// (the caller then reads the body whole). Not ok for anything
// splitModelCall would not take.
func splitAfter(body []byte, start, at int, list string, raw map[string]json.RawMessage, starts, ends []int) ([]int, []int, bool) {
	i := at
	for i < len(body) && isSpace(body[i]) {
		i++
	}
	if i == len(body) {
		return nil, nil, false
	}
	switch body[i] {
	case ',':
		i++
		j := i
		for j < len(body) && isSpace(body[j]) {
			j++
		}
		if j == len(body) || body[j] == ']' {
			return nil, nil, false // a trailing comma
		}
	case ']':
	default:
		return nil, nil, false
	}
	const open = `{"":[`
	synth := make([]byte, 0, len(open)+len(body)-i)
	synth = append(append(synth, open...), body[i:]...)
	shift := i - len(open) // body offset = synth offset + shift
	dec := jsontext.NewDecoder(bytes.NewBuffer(synth))
	for range 3 { // { "" [
		if _, err := dec.ReadToken(); err != nil {
			return nil, nil, false
		}
	}
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, nil, false
		}
		end := int(dec.InputOffset()) + shift
		starts, ends = append(starts, end-len(v)), append(ends, end)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, nil, false
	}
	end := int(dec.InputOffset()) + shift
	raw[list] = body[start:end:end]
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, nil, false
		}
		name := tok.String()
		if _, dup := raw[name]; dup {
			return nil, nil, false
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil, nil, false
		}
		end := int(dec.InputOffset()) + shift
		raw[name] = body[end-len(v) : end : end]
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, nil, false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, nil, false
	}
	return starts, ends, true
}
