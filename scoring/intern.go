package scoring

import "hash/maphash"

// termTable interns terms by a 64-bit hash of their text. Go's map costs
// several cache misses a lookup on a session's vocabulary (control word,
// slot, then the key's bytes); this costs about one. Two distinct terms of
// a session share a hash with odds of about 1 in 10^7 even at a million
// terms, and then they merely count as one term.
type termTable struct {
	seed  maphash.Seed
	slots []termSlot // power of two, at most half full
	n     int
}

type termSlot struct {
	h   uint64 // 0: empty
	tid uint32
}

// reset empties t for at least size terms, keeping its slots when they are
// enough; a nil t makes a new table.
func (t *termTable) reset(seed maphash.Seed, size int) *termTable {
	n := 1024
	for n < 2*size {
		n *= 2
	}
	if t == nil {
		t = &termTable{}
	}
	if len(t.slots) >= n {
		clear(t.slots)
	} else {
		t.slots = make([]termSlot, n)
	}
	t.seed, t.n = seed, 0
	return t
}

// hash returns the hash of key, never 0.
func (t *termTable) hash(key []byte) uint64 {
	return maphash.Bytes(t.seed, key) | 1
}

// find returns the term id stored for hash h, or ok false and the slot to
// insert it at.
func (t *termTable) find(h uint64) (tid uint32, slot int, ok bool) {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.h == h {
			return s.tid, int(i), true
		}
		if s.h == 0 {
			return 0, int(i), false
		}
	}
}

// insert stores tid for h at slot, which find returned for h.
func (t *termTable) insert(h uint64, slot int, tid uint32) {
	t.slots[slot] = termSlot{h, tid}
	t.n++
	if 2*t.n <= len(t.slots) {
		return
	}
	old := t.slots
	t.slots = make([]termSlot, 2*len(old))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.h == 0 {
			continue
		}
		i := s.h & mask
		for t.slots[i].h != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

func (t *termTable) put(key []byte, tid uint32) {
	h := t.hash(key)
	if _, slot, ok := t.find(h); !ok {
		t.insert(h, slot, tid)
	}
}
