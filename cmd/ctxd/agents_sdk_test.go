package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sdkLoop is an agent written against the official SDKs, as their READMEs
// show it: a bash tool, the whole history resent on every call (assistant
// turns kept as the SDK returned them, thinking blocks and reasoning items
// included), until the model answers without a tool call. CTXD_MODE picks
// the API and whether it streams; the base URLs and the window header are
// all it knows of ctxd.
const sdkLoop = `
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { execSync } from 'node:child_process';
const mode = process.env.CTXD_MODE, stream = mode.endsWith('-stream');
const headers = { 'X-Ctxd-Context-Window': process.env.CTXD_WINDOW };
const prompt = process.env.CTXD_PROMPT;
const run = (command) => { try { return execSync(command, { shell: '/bin/bash', encoding: 'utf8', maxBuffer: 1 << 24 }); } catch (e) { return String(e); } };
const schema = { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] };
let final = '';
if (mode.startsWith('anthropic')) {
  const an = new Anthropic({ apiKey: 'sk-ant-fake', defaultHeaders: headers });
  const messages = [{ role: 'user', content: prompt }];
  const tools = [{ name: 'bash', description: 'Run a bash command', input_schema: schema }];
  for (let i = 0; i < 200; i++) {
    const req = { model: 'claude-sonnet-4-5', max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 1024 }, system: 'You are a coding agent.', tools, messages };
    const msg = stream ? await an.messages.stream(req).finalMessage() : await an.messages.create(req);
    messages.push({ role: 'assistant', content: msg.content });
    const uses = msg.content.filter(b => b.type === 'tool_use');
    if (uses.length === 0) { final = msg.content.filter(b => b.type === 'text').map(b => b.text).join(''); break; }
    messages.push({ role: 'user', content: uses.map(u => ({ type: 'tool_result', tool_use_id: u.id, content: run(u.input.command) })) });
  }
} else if (mode.startsWith('responses')) {
  const oa = new OpenAI({ apiKey: 'sk-fake', defaultHeaders: headers });
  const input = [{ role: 'user', content: prompt }];
  const tools = [{ type: 'function', name: 'bash', description: 'Run a bash command', parameters: schema, strict: false }];
  for (let i = 0; i < 200; i++) {
    const req = { model: 'gpt-5', instructions: 'You are a coding agent.', reasoning: { effort: 'low' }, include: ['reasoning.encrypted_content'], store: false, max_output_tokens: 4096, tools, input };
    const r = stream ? await oa.responses.stream(req).finalResponse() : await oa.responses.create(req);
    input.push(...r.output);
    const calls = r.output.filter(o => o.type === 'function_call');
    if (calls.length === 0) { final = r.output_text; break; }
    for (const c of calls) input.push({ type: 'function_call_output', call_id: c.call_id, output: run(JSON.parse(c.arguments).command) });
  }
} else {
  const oa = new OpenAI({ apiKey: 'sk-fake', defaultHeaders: headers });
  const messages = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: prompt }];
  const tools = [{ type: 'function', function: { name: 'bash', description: 'Run a bash command', parameters: schema } }];
  for (let i = 0; i < 200; i++) {
    const req = { model: 'gpt-4o', max_tokens: 4096, tools, messages };
    const c = stream ? await oa.chat.completions.stream({ ...req, stream_options: { include_usage: true } }).finalChatCompletion() : await oa.chat.completions.create(req);
    const m = c.choices[0].message;
    messages.push(m);
    if (!m.tool_calls?.length) { final = m.content; break; }
    for (const tc of m.tool_calls) messages.push({ role: 'tool', tool_call_id: tc.id, content: run(JSON.parse(tc.function.arguments).command) });
  }
}
console.log(final);
`

// TestAgentSDKs runs the loop through each official SDK's API, streamed
// and not.
func TestAgentSDKs(t *testing.T) {
	for _, mode := range []string{"openai-chat", "openai-chat-stream", "anthropic", "anthropic-stream", "responses", "responses-stream"} {
		t.Run(mode, func(t *testing.T) {
			a := newAgentRun(t, 32000)
			// Beside its packages: ES modules resolve from the script's
			// directory only.
			script := filepath.Join(a.npm, "agent-loop.mjs")
			if err := os.WriteFile(script, []byte(sdkLoop), 0o644); err != nil {
				t.Fatal(err)
			}
			out := a.run(a.env("CTXD_MODE="+mode, "CTXD_WINDOW=32000",
				"CTXD_PROMPT="+agentPrompt, "OPENAI_BASE_URL="+a.base+"/v1", "ANTHROPIC_BASE_URL="+a.base), "node", script)
			if !strings.Contains(out, a.task.Final()) {
				t.Errorf("the loop printed %s", tail(out, 2000))
			}
			a.check(mode)
		})
	}
}
