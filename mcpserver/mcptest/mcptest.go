// Package mcptest calls ctxd's MCP tools from tests, through any client
// session of the SDK (in-memory, streamable HTTP, a command's stdio).
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Answer is a tool call's outcome: the structured answer, or the error text.
type Answer struct {
	Out map[string]any
	Err string // the tool error's text, "code: message"; "" on success
}

// Code is the error code a failed call's text starts with.
func (a Answer) Code() string {
	code, _, _ := strings.Cut(a.Err, ": ")
	return code
}

// Call calls a tool. A protocol error (not a tool error) fails the test, and
// so does a successful answer whose text is not its structured answer (a
// client that reads only text must see the same).
func Call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) Answer {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error %v", tool, args, err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		if res.StructuredContent != nil {
			t.Errorf("%s: an error with structured content %v", tool, res.StructuredContent)
		}
		return Answer{Err: text}
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", tool, raw, err)
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text), &fromText); err != nil || fmt.Sprint(fromText) != fmt.Sprint(out) {
		t.Errorf("%s: text content %q is not the structured answer (%v)", tool, text, err)
	}
	return Answer{Out: out}
}

// OK calls a tool that must succeed and returns its answer.
func OK(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t.Helper()
	a := Call(t, cs, tool, args)
	if a.Err != "" {
		t.Fatalf("%s %v: %s", tool, args, a.Err)
	}
	return a.Out
}

// Fails calls a tool that must fail with code and returns the error text.
func Fails(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any, code string) string {
	t.Helper()
	a := Call(t, cs, tool, args)
	if a.Err == "" {
		t.Fatalf("%s %v succeeded: %v; want %s", tool, args, a.Out, code)
	}
	if a.Code() != code {
		t.Fatalf("%s %v: %q; want code %s", tool, args, a.Err, code)
	}
	return a.Err
}
