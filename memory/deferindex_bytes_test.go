package memory

import "testing"

// Deferred writes are bounded by bytes: a write that would take them past
// maxDeferredBytes is not deferred, until the index holds the earlier ones.
// A session's and a tenant's last deferred change are what reads wait for.
func TestPendingWritesBoundedByBytes(t *testing.T) {
	t.Parallel()
	var p pendingWrites
	half := maxDeferredBytes / 2
	if !p.note("t", "a", 10, 0, half) || !p.note("t", "b", 20, 0, half) {
		t.Fatal("writes within the bound were not deferred")
	}
	if p.note("t", "a", 30, 0, 1) {
		t.Fatal("a write past the bound was deferred")
	}
	if got := p.last("t", []string{"a"}); got != 10 {
		t.Errorf("session a waits for change %d, want 10", got)
	}
	if got := p.last("t", nil); got != 20 {
		t.Errorf("the tenant waits for change %d, want 20", got)
	}
	if got := p.last("u", nil); got != 0 {
		t.Errorf("another tenant waits for change %d, want 0", got)
	}
	// The index now holds change 10: its bytes are free again.
	if !p.note("t", "a", 30, 10, half) {
		t.Fatal("a write was not deferred once the index held the earlier one")
	}
	if p.note("t", "c", 40, 10, 1) {
		t.Fatal("a write past the bound was deferred")
	}
}
