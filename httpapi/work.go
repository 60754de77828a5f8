package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

// workSlots bounds the API requests doing work at once; the others wait
// their turn, first come first served, up to a bound, and past it are
// answered 503 with Retry-After. The API's work is CPU (indexing, scoring,
// searching): with every request running at once the cores are shared
// among all of them, so each takes as long as all together and a slow kind
// (a context call) longest; served in turn, a request waits for those
// before it and then runs at full speed. A request that waits inside (for
// a session's lock, a turn to compact: memory.Waiter) gives its slot up
// meanwhile and takes it back after, past the bound if need be, without
// waiting again: it may hold a session's lock by then.
type workSlots struct {
	max     int
	queue   int           // requests that may wait
	maxWait time.Duration // the longest a request waits

	mu      sync.Mutex
	used    int
	waiters []chan struct{} // first come first served; closed: served
}

func newWorkSlots(n, queue int, maxWait time.Duration) *workSlots {
	return &workSlots{max: n, queue: queue, maxWait: maxWait}
}

// acquire waits for a slot until the request is cancelled, the queue is
// full or maxWait passes.
func (w *workSlots) acquire(c echo.Context) error {
	w.mu.Lock()
	if w.used < w.max && len(w.waiters) == 0 {
		w.used++
		w.mu.Unlock()
		return nil
	}
	if len(w.waiters) >= w.queue {
		w.mu.Unlock()
		return w.busy(c, "%d requests wait already (--max-waiting)", w.queue)
	}
	ch := make(chan struct{})
	w.waiters = append(w.waiters, ch)
	w.mu.Unlock()
	t := time.NewTimer(w.maxWait)
	defer t.Stop()
	var err error
	select {
	case <-ch:
		return nil
	case <-t.C:
		err = w.busy(c, "it waited %s for one of %d places (--max-working)", w.maxWait, w.max)
	case <-c.Request().Context().Done():
		err = c.Request().Context().Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if i := slices.Index(w.waiters, ch); i >= 0 {
		w.waiters = slices.Delete(w.waiters, i, i+1)
		return err
	}
	// Served as it gave up: pass the slot on.
	w.releaseLocked()
	return err
}

// release gives a slot back: to the first waiter, or free.
func (w *workSlots) release() {
	w.mu.Lock()
	w.releaseLocked()
	w.mu.Unlock()
}

func (w *workSlots) releaseLocked() {
	if w.used <= w.max && len(w.waiters) > 0 {
		close(w.waiters[0])
		w.waiters = slices.Delete(w.waiters, 0, 1)
		return
	}
	w.used--
}

// retake takes a slot back after a wait inside the request, at once.
func (w *workSlots) retake() {
	w.mu.Lock()
	w.used++
	w.mu.Unlock()
}

func (w *workSlots) busy(c echo.Context, format string, args ...any) error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(w.maxWait/time.Second))))
	return memory.Errorf(memory.EUNAVAILABLE, "the server is busy: "+format+"; retry after Retry-After seconds", args...)
}

// slotWaiter is a request's memory.Waiter: it gives the slot up while the
// request waits.
type slotWaiter struct{ w *workSlots }

func (s slotWaiter) Wait() func() {
	s.w.release()
	return s.w.retake
}

// limitWork runs a request when it gets a slot.
func (s *Server) limitWork(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.work.acquire(c); err != nil {
			return err
		}
		defer s.work.release()
		r := c.Request()
		c.SetRequest(r.WithContext(memory.NewContextWithWaiter(r.Context(), slotWaiter{s.work})))
		return next(c)
	}
}

// limitWorkAfterBody is limitWork for a route that reads a body: the body
// is read first, as far as it goes (limitBody caps it), so that a client
// sending slowly holds no slot others could work in. The handler reads the
// same bytes, then the same error, from the copy.
func (s *Server) limitWorkAfterBody(next echo.HandlerFunc) echo.HandlerFunc {
	work := s.limitWork(next)
	return func(c echo.Context) error {
		r := c.Request()
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			var b []byte
			var err error
			if r.ContentLength > 0 {
				b = make([]byte, r.ContentLength)
				var n int
				n, err = io.ReadFull(r.Body, b)
				b = b[:n]
			} else {
				b, err = io.ReadAll(r.Body)
			}
			r.Body = readCloser{io.MultiReader(bytes.NewReader(b), errReader{err})}
		}
		return work(c)
	}
}

// readCloser is a request body read already.
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

// errReader ends a body read already as its reading ended: with err, or
// io.EOF.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}
