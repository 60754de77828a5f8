package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/ctxd/ctxd/memory"
	"github.com/google/jsonschema-go/jsonschema"
)

// schemas are the tools' input schemas: inferred from the input types, with
// the limits the domain enforces written in, so a model sees them before
// it calls.
var schemas = struct {
	search, save, context, recover, get, status *jsonschema.Schema
}{
	search: inputSchema[searchIn](func(p props) {
		p.nonEmpty("query")
		p.sessionID("session")
		p.between("k", 1, memory.MaxK)
		p.oneOf("mode", memory.ModeHybrid, memory.ModeText, memory.ModeVector)
	}),
	save: inputSchema[saveIn](func(p props) {
		p.sessionID("session")
		p.nonEmpty("content")
		p["pinned"].Default = json.RawMessage("true")
		p.oneOf("role", string(memory.RoleSystem), string(memory.RoleAssistant), string(memory.RoleUser))
	}),
	// max_tokens has no minimum here: the tool's own refusal of 0 says
	// what to do instead, the schema validator's would not. It is typed
	// "integer", not the inferred ["null", "integer"] of a pointer: generic
	// clients (the MCP inspector) sent a string for a type they could not
	// render.
	context: inputSchema[contextIn](func(p props) {
		p.sessionID("session")
		p.get("max_tokens").Types, p.get("max_tokens").Type = nil, "integer"
	}),
	recover: inputSchema[recoverIn](func(p props) {
		p.nonEmpty("id")
		p.sessionID("session")
	}),
	get:    inputSchema[getIn](func(p props) { p.nonEmpty("id") }),
	status: inputSchema[statusIn](func(p props) { p.sessionID("session") }),
}

// toolSchemas are the input schemas by tool name.
var toolSchemas = map[string]*jsonschema.Schema{
	ToolSearch: schemas.search, ToolSave: schemas.save, ToolContext: schemas.context,
	ToolRecover: schemas.recover, ToolGet: schemas.get, ToolStatus: schemas.status,
}

type props map[string]*jsonschema.Schema

func (p props) get(name string) *jsonschema.Schema {
	s, ok := p[name]
	if !ok {
		panic(fmt.Sprintf("mcpserver: schema has no property %q", name))
	}
	return s
}

func (p props) nonEmpty(name string) { p.get(name).MinLength = new(1) }

// sessionID writes API.md's rule for session ids into the schema.
func (p props) sessionID(name string) {
	p.get(name).Pattern = memory.SessionIDPattern
}

func (p props) between(name string, lo, hi float64) {
	s := p.get(name)
	s.Minimum, s.Maximum = &lo, &hi
}

func (p props) oneOf(name string, values ...string) {
	s := p.get(name)
	for _, v := range values {
		s.Enum = append(s.Enum, v)
	}
}

// inputSchema infers T's schema and lets adjust add limits. A failure is a
// bug in this package's types, found by any test that builds a server.
func inputSchema[T any](adjust func(props)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: input schema of %T: %v", *new(T), err))
	}
	adjust(s.Properties)
	return s
}
