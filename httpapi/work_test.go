package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

func workContext(ctx context.Context) echo.Context {
	req := httptest.NewRequest(http.MethodPost, "/v1/search", nil).WithContext(ctx)
	return echo.New().NewContext(req, httptest.NewRecorder())
}

// waitFor yields until n requests wait for a slot.
func (w *workSlots) waitFor(n int) {
	for {
		w.mu.Lock()
		k := len(w.waiters)
		w.mu.Unlock()
		if k == n {
			return
		}
		runtime.Gosched()
	}
}

// Requests past --max-working run in the order they came, each when one
// before it is done.
func TestWorkSlotsInTurn(t *testing.T) {
	w := newWorkSlots(1, 10, time.Hour)
	if err := w.acquire(workContext(context.Background())); err != nil {
		t.Fatal(err)
	}
	served := make(chan int, 3)
	for i := range 3 {
		go func() {
			if err := w.acquire(workContext(context.Background())); err != nil {
				t.Error(err)
			}
			served <- i
		}()
		w.waitFor(i + 1)
	}
	for want := range 3 {
		w.release()
		if got := <-served; got != want {
			t.Fatalf("request %d served in turn %d", got, want)
		}
	}
	w.release()
	if w.used != 0 || len(w.waiters) != 0 {
		t.Fatalf("after all: %d used, %d waiting", w.used, len(w.waiters))
	}
}

// Past --max-waiting, or after --max-wait, a request is answered 503 with
// Retry-After; a cancelled one leaves the queue.
func TestWorkSlotsBusy(t *testing.T) {
	w := newWorkSlots(1, 1, time.Hour)
	if err := w.acquire(workContext(context.Background())); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() { gaveUp <- w.acquire(workContext(ctx)) }()
	w.waitFor(1)
	c := workContext(context.Background())
	err := w.acquire(c)
	if memory.ErrorCode(err) != memory.EUNAVAILABLE || c.Response().Header().Get("Retry-After") == "" {
		t.Fatalf("queue full: %v, Retry-After %q", err, c.Response().Header().Get("Retry-After"))
	}
	cancel()
	if err := <-gaveUp; err != context.Canceled {
		t.Fatalf("cancelled while waiting: %v", err)
	}
	w.waitFor(0)

	w.maxWait = time.Millisecond // nobody releases: it must time out
	c = workContext(context.Background())
	if err := w.acquire(c); memory.ErrorCode(err) != memory.EUNAVAILABLE || c.Response().Header().Get("Retry-After") != "1" {
		t.Fatalf("waited too long: %v, Retry-After %q", err, c.Response().Header().Get("Retry-After"))
	}
	w.waitFor(0)
	w.release()
	if w.used != 0 {
		t.Fatalf("%d used after all were released", w.used)
	}
}

// A request waiting inside (for a session's lock) gives its slot to the
// next in the queue and takes it back at once when its wait ends, past
// --max-working if need be; the bound holds again as they finish.
func TestWorkSlotsWaiterGivesItsSlotUp(t *testing.T) {
	w := newWorkSlots(1, 10, time.Hour)
	if err := w.acquire(workContext(context.Background())); err != nil {
		t.Fatal(err)
	}
	served := make(chan int, 2)
	for i := range 2 {
		go func() {
			if err := w.acquire(workContext(context.Background())); err != nil {
				t.Error(err)
			}
			served <- i
		}()
		w.waitFor(i + 1)
	}
	resume := slotWaiter{w}.Wait()
	if got := <-served; got != 0 {
		t.Fatalf("request %d took the slot given up", got)
	}
	resume() // must not block: the slot is taken past the bound
	w.release()
	w.release() // back to the bound: the waiting request is served
	if got := <-served; got != 1 {
		t.Fatalf("request %d served", got)
	}
	w.release()
	if w.used != 0 || len(w.waiters) != 0 {
		t.Fatalf("after all: %d used, %d waiting", w.used, len(w.waiters))
	}
}
