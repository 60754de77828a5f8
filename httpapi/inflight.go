package httpapi

import (
	"sync"

	"github.com/ctxd/ctxd/memory"
)

// bodyBudget bounds the request body bytes being handled at once. A write
// costs many times its body while it is decoded, tokenized, compressed and
// indexed (a 7 MiB body of 1 MB messages: RSS 83 -> 325 MB, mostly Bleve's
// analysis; four at once peaked at 1.36 GB), so the budget is what bounds
// the server's memory under concurrent large writes, not the body limit.
type bodyBudget struct {
	max int64

	mu   sync.Mutex
	used int64
}

// take reserves n bytes, or reports that the budget cannot hold them now.
// It does not wait: a client told 503 with Retry-After retries, while a
// queue would hold its connection and body in memory meanwhile.
func (b *bodyBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	// One body alone always fits, whatever its size, so a budget below the
	// body limit slows big writes down to one at a time but never refuses
	// them for good.
	if b.used > 0 && b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

func (b *bodyBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// errBusy is the answer when the budget is spent.
func (b *bodyBudget) errBusy(n int64) error {
	return memory.Errorf(memory.EUNAVAILABLE, "the server is busy: it is handling %d bytes of request bodies, and this one's %d would pass --max-body-bytes-in-flight (%d); retry after Retry-After seconds", b.inUse(), n, b.max)
}

func (b *bodyBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
