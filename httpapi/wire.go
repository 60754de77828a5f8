package httpapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
)

// toMessage is the i-th message of a write, for the domain.
func toMessage(in *api.MessageIn, i int) (*memory.Message, error) {
	created, err := memory.ParseTime("created_at", in.CreatedAt)
	if err != nil {
		return nil, memory.Errorf(memory.EINVALID, "messages[%d].%s", i, memory.ErrorMessage(err))
	}
	// The zero time is how the domain says "not given": stored, it would
	// silently become the time of storing.
	if in.CreatedAt != "" && created.IsZero() {
		return nil, memory.Errorf(memory.EINVALID, "messages[%d].created_at: %s is the zero time, which cannot be stored as sent; omit created_at for the time of storing", i, in.CreatedAt)
	}
	md, err := metadataIn(in.Metadata)
	if err != nil {
		return nil, memory.Errorf(memory.EINVALID, "messages[%d].metadata: %v", i, err)
	}
	return &memory.Message{
		Role: memory.Role(in.Role), Content: in.Content, Name: in.Name, ToolCallID: in.ToolCallID,
		ToolCalls: in.ToolCalls, Important: in.Important, Pinned: in.Pinned, Metadata: md, CreatedAt: created,
		ClientID: in.MessageID,
	}, nil
}

// metadataIn converts decoded numbers to Go numbers; other value checks are
// the domain's.
func metadataIn(md map[string]any) (map[string]any, error) {
	for k, v := range md {
		if n, ok := v.(json.Number); ok {
			x, err := numberValue(n)
			if err != nil {
				return nil, err
			}
			md[k] = x
		}
	}
	return md, nil
}

func toMessageOut(m *memory.Message) api.Message {
	md := m.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return api.Message{
		ID: m.ID, SessionID: m.SessionID, Role: m.Role, Content: m.Content, Name: m.Name,
		ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls, Important: m.Important, Pinned: m.Pinned,
		Metadata: md, CreatedAt: m.CreatedAt, Tokens: m.Tokens, State: m.State, Kind: m.Kind, Sources: m.Sources,
		MessageID: m.ClientID, Versions: m.Versions, VersionOf: m.VersionOf,
	}
}

func toMessagesOut(msgs []*memory.Message) []api.Message {
	out := make([]api.Message, len(msgs))
	for i, m := range msgs {
		out[i] = toMessageOut(m)
	}
	return out
}

// sessionPolicy is the overrides of both forms. A field set in both with two
// values is refused: neither can be taken without ignoring the other.
func sessionPolicy(in *api.SessionIn) (memory.PolicyOverrides, error) {
	if in.Policy == nil {
		return in.PolicyOverrides, nil
	}
	var top, nested map[string]any
	if err := roundTrip(&in.PolicyOverrides, &top); err != nil {
		return memory.PolicyOverrides{}, err
	}
	if err := roundTrip(in.Policy, &nested); err != nil {
		return memory.PolicyOverrides{}, err
	}
	for _, k := range slices.Sorted(maps.Keys(nested)) {
		if v, ok := top[k]; ok && v != nested[k] {
			return memory.PolicyOverrides{}, memory.Errorf(memory.EINVALID,
				"%s is %v but policy.%s is %v: set it once", k, v, k, nested[k])
		}
	}
	return *in.PolicyOverrides.Merge(in.Policy), nil
}

func roundTrip(src, dst any) error {
	b, err := json.Marshal(src)
	if err != nil {
		return fmt.Errorf("encode policy: %w", err)
	}
	return json.Unmarshal(b, dst)
}

func toColdOut(m *memory.Message) api.ColdChunk {
	out := api.ColdChunk{Message: toMessageOut(m)}
	if c := m.Cold; c != nil {
		out.DropReason, out.RelevanceScore, out.PromptAtDrop = c.DropReason, c.RelevanceScore, c.PromptAtDrop
		out.RecoverableUntil, out.DroppedAt, out.SummaryID = c.RecoverableUntil, c.DroppedAt, c.SummaryID
	}
	return out
}
