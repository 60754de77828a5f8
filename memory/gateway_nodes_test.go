package memory_test

import (
	"context"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// Two nodes on one shared store (two gateways, each with its own memory,
// on one service): the calibration learnt from a call on A is the one B
// builds the session's next window with. Kept only by A, B built it at 1
// and overfilled the provider's window.
func TestGatewayCalibrationSharedByNodes(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t, func(s *memory.Service) { s.SharedStore = true })
	a, b := memory.NewGateway(h.Service), memory.NewGateway(h.Service)
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	req := func(text string) memory.GatewayRequest {
		return memory.GatewayRequest{Session: "s", ContextWindow: 8000, Reserve: 500,
			History: []*memory.Message{{Role: memory.RoleUser, Content: text}}}
	}
	w, err := a.Prepare(ctx, req("first question about the ferry timetable"))
	if err != nil || w.Ratio != 1 {
		t.Fatalf("A's first window: ratio %v, %v", w.Ratio, err)
	}
	a.Calibrate(ctx, "s", 1000, 1300)
	if err := a.RecordUsage(ctx, "s", memory.PromptUsage{Input: 1300}); err != nil {
		t.Fatal(err)
	}
	w, err = b.Prepare(ctx, req("second question about the ferry timetable"))
	if want := 1.3 * 1.05; err != nil || w.Ratio < want-1e-9 || w.Ratio > want+1e-9 {
		t.Fatalf("B's window after A learnt %v: ratio %v, %v", want, w.Ratio, err)
	}
}
