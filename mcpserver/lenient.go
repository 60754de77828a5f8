package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// integerStrings lets a client that sends a number as a string ("500") call
// a tool: generic clients such as the MCP inspector send what a form field
// holds, and their forms are text. Before the SDK validates a call against
// the tool's input schema, each argument the schema types as an integer and
// the client sent as a string of digits becomes that number; anything else
// is left for the schema to refuse.
func integerStrings(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil {
			if s := toolSchemas[call.Params.Name]; s != nil {
				call.Params.Arguments = coerceIntegers(s, call.Params.Arguments)
			}
		}
		return next(ctx, method, req)
	}
}

var digits = regexp.MustCompile(`^\s*-?[0-9]{1,18}\s*$`)

func coerceIntegers(s *jsonschema.Schema, raw json.RawMessage) json.RawMessage {
	var args map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &args) != nil {
		return raw
	}
	changed := false
	for name, v := range args {
		p := s.Properties[name]
		if p == nil || p.Type != "integer" {
			continue
		}
		var str string
		if json.Unmarshal(v, &str) != nil || !digits.MatchString(str) {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(str), 10, 64)
		if err != nil {
			continue
		}
		args[name] = json.RawMessage(strconv.FormatInt(n, 10))
		changed = true
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(args)
	if err != nil {
		return raw
	}
	return out
}

// sdkLogs is the logger the SDK writes to: its records are about the
// protocol's plumbing (a connection opened, a session closed), one message
// string each, so they go into ctxd's log at debug, marked as the SDK's,
// and its errors stay errors.
func sdkLogs(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return slog.New(lowered{l.Handler().WithAttrs([]slog.Attr{slog.String("component", "mcp-sdk")})})
}

type lowered struct{ h slog.Handler }

func (d lowered) level(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (d lowered) Enabled(ctx context.Context, l slog.Level) bool { return d.h.Enabled(ctx, d.level(l)) }

func (d lowered) Handle(ctx context.Context, r slog.Record) error {
	r.Level = d.level(r.Level)
	return d.h.Handle(ctx, r)
}

func (d lowered) WithAttrs(as []slog.Attr) slog.Handler { return lowered{d.h.WithAttrs(as)} }
func (d lowered) WithGroup(name string) slog.Handler    { return lowered{d.h.WithGroup(name)} }
