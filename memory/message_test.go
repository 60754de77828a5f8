package memory_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

func call(id, typ, name, args string) memory.ToolCall {
	return memory.ToolCall{ID: id, Type: typ, Function: memory.FunctionCall{Name: name, Arguments: args}}
}

// Every text field of a message refuses NULs and invalid UTF-8.
func TestValidateRefusesBadText(t *testing.T) {
	t.Parallel()
	good := func() *memory.Message {
		return &memory.Message{Role: memory.RoleAssistant, Content: "ok", ToolCalls: []memory.ToolCall{call("c1", "function", "ls", "{}")}}
	}
	if err := good().Validate(0, memory.DefaultLimits); err != nil {
		t.Fatalf("good message: %v", err)
	}
	for name, mutate := range map[string]func(m *memory.Message){
		"content NUL":         func(m *memory.Message) { m.Content = "a\x00b" },
		"content invalid":     func(m *memory.Message) { m.Content = "a\xffb" },
		"name NUL":            func(m *memory.Message) { m.Name = "a\x00" },
		"tool call id NUL":    func(m *memory.Message) { m.ToolCalls[0].ID = "c\x00" },
		"tool call type NUL":  func(m *memory.Message) { m.ToolCalls[0].Type = "func\x00tion" },
		"tool call type utf8": func(m *memory.Message) { m.ToolCalls[0].Type = "\xc0\xaf" },
		"function name NUL":   func(m *memory.Message) { m.ToolCalls[0].Function.Name = "l\x00s" },
		"arguments NUL":       func(m *memory.Message) { m.ToolCalls[0].Function.Arguments = "{\x00}" },
		"metadata key NUL":    func(m *memory.Message) { m.Metadata = map[string]any{"k\x00": 1} },
		"metadata value NUL":  func(m *memory.Message) { m.Metadata = map[string]any{"k": "\x00"} },
	} {
		m := good()
		mutate(m)
		err := m.Validate(3, memory.DefaultLimits)
		if memory.ErrorCode(err) != memory.EINVALID || !strings.Contains(memory.ErrorMessage(err), "messages[3]") {
			t.Errorf("%s: %v, want invalid_request naming messages[3]", name, err)
		}
	}
}

// created_at must be writable as RFC 3339 once stored in UTC.
func TestValidateCreatedAt(t *testing.T) {
	t.Parallel()
	for at, ok := range map[string]bool{
		"2026-01-02T15:04:05Z":      true,
		"0001-01-01T00:00:00Z":      true, // the zero time: "now"
		"0001-01-01T00:00:00-01:00": true,
		"9999-12-31T23:59:59Z":      true,
		"9999-12-31T23:59:59-23:59": false, // year 10000 in UTC
		"0000-01-01T00:00:00+23:59": false, // year -1 in UTC
		"0000-01-01T00:00:00Z":      true,  // year 0 is written as 0000
		"2026-01-01T00:00:00+24:00": false,
	} {
		ts, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			t.Fatalf("%s: %v", at, err)
		}
		m := &memory.Message{Role: memory.RoleUser, Content: "x", CreatedAt: ts}
		err = m.Validate(0, memory.DefaultLimits)
		if ok != (err == nil) {
			t.Errorf("created_at %s: %v, want ok=%v", at, err, ok)
		}
		if err != nil && (memory.ErrorCode(err) != memory.EINVALID || !strings.Contains(err.Error(), "created_at")) {
			t.Errorf("created_at %s: %v", at, err)
		}
	}
}

// A call id names one call of a message, whether the message holds a few
// calls or many.
func TestValidateRefusesRepeatedCallIDs(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 20} {
		var calls []memory.ToolCall
		for i := range n {
			calls = append(calls, call(strings.Repeat("c", i+1), "function", "ls", "{}"))
		}
		m := &memory.Message{Role: memory.RoleAssistant, ToolCalls: calls}
		if err := m.Validate(0, memory.DefaultLimits); err != nil {
			t.Fatalf("%d distinct calls: %v", n, err)
		}
		m.ToolCalls[n-1].ID = m.ToolCalls[0].ID
		if err := m.Validate(0, memory.DefaultLimits); err == nil || !strings.Contains(err.Error(), "names an earlier call") {
			t.Errorf("%d calls, the last repeating the first's id: %v", n, err)
		}
	}
}
