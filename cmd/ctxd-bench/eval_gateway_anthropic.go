package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/ctxd/ctxd/internal/fakemodel"
	"github.com/ctxd/ctxd/memory"
	openai "github.com/sashabaranov/go-openai"
)

// The gateway replay in Anthropic's Messages API (--gateway-api anthropic):
// the agent calls POST /v1/messages through anthropic-sdk-go and marks its
// system prompt and its newest message with cache_control, as Claude Code
// does; the model reports its prompt cache as Anthropic would (the
// prefixes the previous request's breakpoints wrote, read from one of this
// request's breakpoints, and what this one writes), so the figures show
// what ctxd's breakpoint at the end of its stable prefix earns.

// The APIs the gateway replay calls.
const (
	gatewayOpenAI    = "openai"
	gatewayAnthropic = "anthropic"
)

// anthropicBlock is one block of a Messages request as the cache sees it.
type anthropicBlock struct {
	key        string
	tokens     int
	breakpoint bool
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

// serveAnthropic answers a Messages request with the next recorded turn,
// keeps what it was sent as the chat messages the figures read, and
// reports its prompt cache by Anthropic's rules.
func (m *gatewayModel) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		m.mu.Lock()
		m.fault = errors.Join(m.fault, fmt.Errorf("the model could not read a request: %w", err))
		m.mu.Unlock()
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"unreadable request"}}`, http.StatusBadRequest)
		return
	}
	var got []openai.ChatCompletionMessage
	var blocks []anthropicBlock
	add := func(role string, b fakemodel.AnthropicBlock) error {
		n, err := m.tok.Count(memory.EncodingO200k, b.Said())
		if err != nil {
			return err
		}
		blocks = append(blocks, anthropicBlock{key: role + "\x00" + b.Type + "\x00" + b.ID + b.ToolUseID + "\x00" + b.Said(),
			tokens: n + anthropicBlockFraming, breakpoint: len(b.CacheControl) > 0 && string(b.CacheControl) != "null"})
		return nil
	}
	fail := func(err error) {
		http.Error(w, `{"type":"error","error":{"type":"api_error","message":"count"}}`, http.StatusInternalServerError)
	}
	if len(req.System) > 0 {
		for _, b := range fakemodel.AnthropicBlocks(req.System) {
			if err := add("system", b); err != nil {
				fail(err)
				return
			}
			got = append(got, openai.ChatCompletionMessage{Role: "system", Content: b.Text})
		}
	}
	for _, msg := range req.Messages {
		var asst *openai.ChatCompletionMessage
		for _, b := range fakemodel.AnthropicBlocks(msg.Content) {
			if err := add(msg.Role, b); err != nil {
				fail(err)
				return
			}
			switch {
			case msg.Role == "assistant":
				if asst == nil {
					got = append(got, openai.ChatCompletionMessage{Role: "assistant"})
					asst = &got[len(got)-1]
				}
				if b.Type == "tool_use" {
					asst.ToolCalls = append(asst.ToolCalls, openai.ToolCall{ID: b.ID, Type: openai.ToolTypeFunction,
						Function: openai.FunctionCall{Name: b.Name, Arguments: string(compactJSON(b.Input))}})
				} else {
					asst.Content += b.Text
				}
			case b.Type == "tool_result":
				got = append(got, openai.ChatCompletionMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: b.Said()})
			default:
				got = append(got, openai.ChatCompletionMessage{Role: msg.Role, Content: b.Text})
			}
		}
	}
	flush := false
	for _, t := range req.Tools {
		flush = flush || t.Name == memory.SaveMemoryTool
	}
	prompt := 0
	for _, b := range blocks {
		prompt += b.tokens
	}
	m.mu.Lock()
	answer := m.next
	read, written := 0, 0
	if flush {
		m.flushTurns++
		answer = openai.ChatCompletionMessage{Role: "assistant", Content: "Nothing to save."}
	} else {
		m.got = got
		common := 0
		for common < len(m.prevBlocks) && common < len(blocks) && m.prevBlocks[common].key == blocks[common].key {
			common++
		}
		read, written = fakemodel.AnthropicCached(cacheSegments(m.prevBlocks), cacheSegments(blocks), common)
		m.prevBlocks = blocks
		m.promptSum += prompt
		m.cachedSum += read
		m.writeSum += written
	}
	m.mu.Unlock()
	content := []map[string]any{}
	if answer.Content != "" || len(answer.ToolCalls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": answer.Content})
	}
	stop := "end_turn"
	for _, tc := range answer.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name,
			"input": json.RawMessage(tc.Function.Arguments)})
		stop = "tool_use"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{ //nolint:errcheck // the gateway reads it
		"id": "msg_eval", "type": "message", "role": "assistant", "model": req.Model, "content": content,
		"stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": prompt - read - written, "cache_read_input_tokens": read,
			"cache_creation_input_tokens": written, "output_tokens": 1},
	})
}

// anthropicBlockFraming is what the model adds to each block's text.
const anthropicBlockFraming = 3

func cacheSegments(blocks []anthropicBlock) []fakemodel.CacheSegment {
	out := make([]fakemodel.CacheSegment, len(blocks))
	for i, b := range blocks {
		out[i] = fakemodel.CacheSegment{Tokens: b.tokens, Breakpoint: b.breakpoint}
	}
	return out
}

// anthropicSender calls through anthropic-sdk-go: the system prompt as
// system, each tool result a tool_result block of the user turn after
// the call (with any user text that follows), breakpoints after the
// system prompt and on the newest block.
func anthropicSender(cl *evalClient, hc *http.Client) gatewaySend {
	client := anthropic.NewClient(option.WithBaseURL(cl.BaseURL()), option.WithAPIKey("sk-ant-eval"),
		option.WithHTTPClient(hc), option.WithMaxRetries(0))
	return func(ctx context.Context, msgs []openai.ChatCompletionMessage, maxTokens int) error {
		params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: int64(maxTokens)}
		for _, m := range msgs {
			switch m.Role {
			case "system":
				params.System = append(params.System, anthropic.TextBlockParam{Text: m.Content})
				continue
			case "assistant":
				var blocks []anthropic.ContentBlockParamUnion
				if m.Content != "" {
					blocks = append(blocks, anthropic.NewTextBlock(m.Content))
				}
				for _, tc := range m.ToolCalls {
					blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, json.RawMessage(tc.Function.Arguments), tc.Function.Name))
				}
				params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
				continue
			}
			block := anthropic.NewTextBlock(m.Content)
			if m.Role == "tool" {
				block = anthropic.NewToolResultBlock(m.ToolCallID, m.Content, false)
			}
			if n := len(params.Messages); n > 0 && params.Messages[n-1].OfUser != nil {
				params.Messages[n-1].OfUser.Content = append(params.Messages[n-1].OfUser.Content, block)
			} else {
				params.Messages = append(params.Messages, anthropic.NewUserMessage(block))
			}
		}
		if n := len(params.System); n > 0 {
			params.System[n-1].CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		if n := len(params.Messages); n > 0 && params.Messages[n-1].OfUser != nil {
			last := params.Messages[n-1].OfUser.Content
			if cc := last[len(last)-1].GetCacheControl(); cc != nil {
				*cc = anthropic.NewCacheControlEphemeralParam()
			}
		}
		_, err := client.Messages.New(ctx, params)
		return err
	}
}
