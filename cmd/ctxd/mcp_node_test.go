package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// mcpNodeSDK is the official TypeScript SDK of the protocol: a client
// nobody here wrote.
const mcpNodeSDK = `{"private": true, "type": "module", "dependencies": {"@modelcontextprotocol/sdk": "^1"}}`

// mcpNodeScript lists ctxd's tools over streamable HTTP at /mcp and calls
// each, configured as the README says (the URL and the key header). The
// SDK checks each answer's structured content against the tool's output
// schema itself.
const mcpNodeScript = `
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
const transport = new StreamableHTTPClientTransport(new URL(process.env.CTXD_MCP_URL),
  { requestInit: { headers: { Authorization: 'Bearer ' + process.env.CTXD_API_KEY } } });
const client = new Client({ name: 'ctxd-ts-e2e', version: '1.0.0' });
await client.connect(transport);
const out = { tools: (await client.listTools()).tools.map(t => t.name).sort() };
const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  return { isError: !!r.isError, structured: r.structuredContent ?? null, text: r.content?.[0]?.text ?? '' };
};
out.save = await call('memory_save', { session: 'ts', content: 'The deploy target is staging-eu.' });
out.search = await call('memory_search', { query: 'deploy target', session: 'ts' });
out.get = await call('memory_get', { id: out.save.structured?.id ?? 'none' });
out.status = await call('session_status', { session: 'ts' });
out.context = await call('memory_context', { session: 'ts', prompt: 'where do we deploy?' });
out.recover = await call('memory_recover', { id: process.env.CTXD_COLD });
out.badMode = await call('memory_search', { query: 'x', mode: 'fuzzy' });
out.missing = await call('memory_get', { id: 'no-such-message' });
out.resource = (await client.readResource({ uri: 'ctxd://sessions/ts' })).contents[0].text;
await client.close();
console.log(JSON.stringify(out));
`

type nodeToolAnswer struct {
	IsError    bool           `json:"isError"`
	Structured map[string]any `json:"structured"`
	Text       string         `json:"text"`
}

func TestMCPTypeScriptSDK(t *testing.T) {
	t.Parallel()
	dir := installNodePackages(t, "ctxd-mcp-node-sdk", mcpNodeSDK)
	ts := startWithKeys(t)
	cold := seedTrip(t, ts.as(keyA))
	raw := runNodeScript(t, dir, "mcp.mjs", mcpNodeScript,
		"CTXD_MCP_URL="+ts.URL+"/mcp", "CTXD_API_KEY="+keyA, "CTXD_COLD="+cold)
	var got struct {
		Tools                                                         []string
		Save, Search, Get, Status, Context, Recover, BadMode, Missing nodeToolAnswer
		Resource                                                      string
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("node printed %s: %v", raw, err)
	}
	want := []string{"memory_context", "memory_get", "memory_recover", "memory_save", "memory_search", "session_status"}
	if !slices.Equal(got.Tools, want) {
		t.Errorf("tools %v, want %v", got.Tools, want)
	}
	for name, a := range map[string]nodeToolAnswer{"memory_save": got.Save, "memory_search": got.Search, "memory_get": got.Get,
		"session_status": got.Status, "memory_context": got.Context, "memory_recover": got.Recover} {
		if a.IsError || a.Structured == nil {
			t.Errorf("%s: %+v", name, a)
		}
	}
	id, _ := got.Save.Structured["id"].(string)
	if res := fmtJSON(got.Search.Structured["results"]); !strings.Contains(res, "staging-eu") {
		t.Errorf("search for the saved note: %s", res)
	}
	if got.Get.Structured["id"] != id || got.Get.Structured["pinned"] != true {
		t.Errorf("get of the note %s: %v", id, got.Get.Structured)
	}
	if got.Status.Structured["id"] != "ts" || !strings.Contains(fmtJSON(got.Context.Structured["messages"]), "staging-eu") {
		t.Errorf("status %v, context %v", got.Status.Structured, got.Context.Structured)
	}
	if got.Recover.Structured["id"] != cold || got.Recover.Structured["state"] != "recovered" {
		t.Errorf("recover %s: %v", cold, got.Recover.Structured)
	}
	if !got.BadMode.IsError || !strings.HasPrefix(got.BadMode.Text, "invalid_request: ") {
		t.Errorf("bad mode: %+v", got.BadMode)
	}
	if !got.Missing.IsError || !strings.HasPrefix(got.Missing.Text, "not_found: ") {
		t.Errorf("missing message: %+v", got.Missing)
	}
	if !strings.Contains(got.Resource, `"id":"ts"`) {
		t.Errorf("resource ctxd://sessions/ts: %s", got.Resource)
	}
}
