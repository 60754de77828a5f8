package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/maphash"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ctxd/ctxd/memory"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"
)

// Reading a model call. An agent resends its whole history on every call,
// so what reading costs per message is paid again on every call: a
// 1,000-step session's calls grew 3x slower from first to last quarter
// while its body was read in three decodings (the body as a map, as the
// request, each message again), each a validating scan and a decoding
// scan. The body is now read once (splitModelCall), and a message the
// client sent before, byte for byte, is taken from what it decoded to then
// (decodedCache): only the history's new tail is decoded.

// decodeModelCall reads a model call's body into req, and as a map: what
// the gateway does not read is passed to the upstream as the client sent
// it. The members of the body's list member (its history: "messages",
// "input") are answered apart, as sent, and are not decoded into req; nil
// when that member is not an array.
// rep says which of the list's elements repeat a recent call's.
func decodeModelCall(c echo.Context, req any, list string, lists *listCache) (map[string]json.RawMessage, []json.RawMessage, listRepeat, error) {
	body, err := readBody(c.Request())
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, nil, listRepeat{}, memory.Errorf(memory.ETOOLARGE, "request body is over the gateway's limit of %d bytes", tooBig.Limit)
	}
	if err != nil {
		return nil, nil, listRepeat{}, err
	}
	if raw, elems, rep, ok := splitRepeat(body, list, lists); ok {
		rest := make(map[string]json.RawMessage, len(raw))
		for k, v := range raw {
			if k != list || elems == nil {
				rest[k] = v
			}
		}
		b, err := json.Marshal(rest)
		if err == nil {
			err = json.Unmarshal(b, req)
		}
		if err != nil {
			return nil, nil, listRepeat{}, memory.Errorf(memory.EINVALID, "body: %v", err)
		}
		return raw, elems, rep, nil
	}
	// A body the one pass did not take (bad text, a duplicate member, not
	// an object): read as before, for the errors clients know.
	if err := checkJSONText(body); err != nil {
		return nil, nil, listRepeat{}, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, nil, listRepeat{}, memory.Errorf(memory.EINVALID, "body: not a JSON object: %v", err)
	}
	if err := json.Unmarshal(body, req); err != nil {
		return nil, nil, listRepeat{}, memory.Errorf(memory.EINVALID, "body: %v", err)
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw[list], &elems) != nil {
		elems = nil
	}
	return raw, elems, listRepeat{}, nil
}

// splitModelCall reads body in one pass: its members as sent, and the
// elements of its member list as sent, when that is an array. The answers
// are slices of body. Not ok for anything but one JSON object of valid
// text whose members are named once: jsontext refuses invalid UTF-8, a
// lone surrogate escape and a name given twice as it reads, which are
// checkJSONText's rules. With lists (nil: none), the part of the list that
// repeats a recent call's, byte for byte, is not read again (see listCache).
func splitModelCall(body []byte, list string, lists *listCache) (raw map[string]json.RawMessage, elems []json.RawMessage, ok bool) {
	raw, elems, _, ok = splitRepeat(body, list, lists)
	return raw, elems, ok
}

// splitRepeat is splitModelCall, saying too which elements of the list
// repeat a recent call's.
func splitRepeat(body []byte, list string, lists *listCache) (raw map[string]json.RawMessage, elems []json.RawMessage, rep listRepeat, ok bool) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body)) // read in place; a Reader is copied into a growing buffer
	tok, err := dec.ReadToken()
	if err != nil || tok.Kind() != '{' {
		return nil, nil, rep, false
	}
	raw = map[string]json.RawMessage{}
	var start int
	var starts, ends []int // the list's elements, as offsets in body
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, nil, rep, false
		}
		name := tok.String() // the token is void after the next read
		if list != "" && name == list && dec.PeekKind() == '[' {
			if _, err := dec.ReadToken(); err != nil {
				return nil, nil, rep, false
			}
			start = int(dec.InputOffset()) - 1
			starts, ends = []int{}, []int{}
			for dec.PeekKind() != ']' {
				if len(ends) == keyed {
					if seen := lists.get(listKey(list, body[start:ends[keyed-1]])); seen != nil {
						if k := seen.repeated(body, start); k >= keyed {
							// the rest of the body is read from where the repeated part ends
							for j := range k {
								starts = append(starts[:j], seen.starts[j]-seen.start+start)
								ends = append(ends[:j], seen.ends[j]-seen.start+start)
							}
							if starts, ends, ok = splitAfter(body, start, ends[k-1], list, raw, starts, ends); !ok {
								// read whole, for its own answer (a "" member after the list is fine)
								return splitRepeat(body, list, nil)
							}
							lists.resumed.Add(1)
							elems, rep.self = listed(body, start, starts, ends, list, lists)
							rep.seen, rep.k = seen, k
							return raw, elems, rep, true
						}
					}
				}
				v, err := dec.ReadValue()
				if err != nil {
					return nil, nil, rep, false
				}
				end := int(dec.InputOffset())
				starts, ends = append(starts, end-len(v)), append(ends, end)
			}
			if _, err := dec.ReadToken(); err != nil {
				return nil, nil, rep, false
			}
			raw[list] = body[start:dec.InputOffset():dec.InputOffset()]
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil, nil, rep, false
		}
		end := dec.InputOffset()
		raw[name] = body[end-int64(len(v)) : end : end]
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, nil, rep, false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, nil, rep, false // data after the object
	}
	if ends == nil {
		return raw, nil, rep, true
	}
	elems, rep.self = listed(body, start, starts, ends, list, lists)
	return raw, elems, rep, true
}

// listed answers the list's elements as slices of body, and records the
// list in lists for the next call, answering the record (nil: not
// recorded).
func listed(body []byte, start int, starts, ends []int, list string, lists *listCache) ([]json.RawMessage, *seenList) {
	elems := make([]json.RawMessage, len(ends))
	for i, e := range ends {
		elems[i] = body[starts[i]:e:e]
	}
	if len(ends) < keyed || lists == nil {
		return elems, nil
	}
	l := &seenList{body: body, start: start, starts: starts, ends: ends, id: listIDs.Add(1)}
	lists.put(listKey(list, body[start:ends[keyed-1]]), l)
	return elems, l
}

// listRepeat says that a call's list (recorded as self; nil: not) repeats
// the first k elements of the recent call seen's (nil: none) byte for byte.
type listRepeat struct {
	self, seen *seenList
	k          int
}

// decoded answers what the repeated elements decoded to in the recent
// call (nil: not known; the caller decodes them).
func (rep listRepeat) decoded() []*decodedMessage {
	if rep.seen == nil || rep.k == 0 {
		return nil
	}
	if d := rep.seen.decoded.Load(); d != nil && len(*d) >= rep.k {
		return (*d)[:rep.k]
	}
	return nil
}

// keep records what the call's elements decoded to, for the next call.
func (rep listRepeat) keep(decoded []*decodedMessage) {
	if rep.self != nil {
		rep.self.decoded.Store(&decoded)
	}
}

// history is rep in the terms of the call's history: elements [0, k)
// turned into history[:upTo], whose messages that are not standing system
// messages the memory layer counts (see memory.HistoryRepeat).
func (rep listRepeat) history(history []*memory.Message, upTo int) memory.HistoryRepeat {
	var r memory.HistoryRepeat
	if rep.self != nil {
		r.Call = rep.self.id
	}
	if rep.seen == nil || rep.k == 0 {
		return r
	}
	r.Of = rep.seen.id
	for _, m := range history[:upTo] {
		if !m.IsStandingSystem() {
			r.N++
		}
	}
	return r
}

// decodedCache remembers what recent client messages decoded to, by their
// bytes as sent. Decoding is the same for every caller, so one table
// serves every tenant; bounded by the bytes it holds: when full it starts
// over (the next call of each session decodes its history once more).
type decodedCache struct {
	mu      sync.Mutex
	entries map[uint64]*decodedMessage
	size    int
	// lookups counts the messages looked up: those a recent call of the
	// same conversation sent too are not (see listRepeat.decoded).
	lookups atomic.Int64
}

// decodedMessage is one client message, decoded.
type decodedMessage struct {
	raw      []byte
	msgs     []*memory.Message
	thinking bool // an Anthropic message holding a thinking block
}

// maxDecodedBytes bounds the bytes of client messages the cache holds (and
// about as much again of their decoded text): a 1,000-step session's
// history is about 1 MB.
const maxDecodedBytes = 32 << 20

var decodedSeed = maphash.MakeSeed()

// get answers what raw decoded to, as copies the caller may change.
func (c *decodedCache) get(raw []byte) (*decodedMessage, bool) {
	c.lookups.Add(1)
	c.mu.Lock()
	d := c.entries[maphash.Bytes(decodedSeed, raw)]
	c.mu.Unlock()
	if d == nil || !bytes.Equal(d.raw, raw) {
		return nil, false
	}
	out := &decodedMessage{raw: d.raw, thinking: d.thinking, msgs: make([]*memory.Message, len(d.msgs))}
	for i, m := range d.msgs {
		out.msgs[i] = cloneMessage(m)
	}
	return out, true
}

// put records what raw decoded to (copies: the caller goes on with its own).
func (c *decodedCache) put(raw []byte, msgs []*memory.Message, thinking bool) {
	d := &decodedMessage{raw: bytes.Clone(raw), thinking: thinking, msgs: make([]*memory.Message, len(msgs))}
	n := len(raw)
	for i, m := range msgs {
		d.msgs[i] = cloneMessage(m)
		n += len(m.Content)
	}
	if n > maxDecodedBytes/16 {
		return // one huge message: not worth a sixteenth of the table
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || c.size+n > maxDecodedBytes {
		c.entries, c.size = map[uint64]*decodedMessage{}, 0
	}
	c.entries[maphash.Bytes(decodedSeed, raw)] = d
	c.size += n
}

// cloneMessage copies what storing a message may change of it.
func cloneMessage(m *memory.Message) *memory.Message {
	c := *m
	c.ToolCalls = slices.Clone(m.ToolCalls)
	c.Metadata = maps.Clone(m.Metadata)
	return &c
}
