package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

// patchFields are the fields PATCH /v1/messages/{id} may set.
var patchFields = []string{"content", "pinned", "important", "metadata"}

// fixedFields are a message's other fields: named in a PATCH they get their
// own answer (they cannot change), not "unknown field".
var fixedFields = []string{"id", "session_id", "role", "name", "tool_call_id", "tool_calls", "created_at", "tokens",
	"state", "kind", "sources", "message_id", "versions", "version_of"}

// patchMessage answers PATCH /v1/messages/:id: the edited message.
func (s *Server) patchMessage(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var body map[string]json.RawMessage
	if err := s.decode(c, &body); err != nil {
		return err
	}
	edit, err := messageEdit(body)
	if err != nil {
		return err
	}
	res, err := s.svc.EditMessage(c.Request().Context(), id, edit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toMessageOut(res.Message))
}

// messageEdit reads a PATCH body strictly: a field this route does not
// take is refused rather than ignored, so a client that means to change a
// role or a typo'd "pined" learns at once that nothing happened.
func messageEdit(body map[string]json.RawMessage) (memory.MessageEdit, error) {
	var e memory.MessageEdit
	for _, k := range sortedKeys(body) {
		raw := body[k]
		var err error
		switch k {
		case "content":
			e.Content = new(string)
			err = decodeField(k, raw, e.Content, "a string")
		case "pinned":
			e.Pinned = new(bool)
			err = decodeField(k, raw, e.Pinned, "true or false")
		case "important":
			e.Important = new(bool)
			err = decodeField(k, raw, e.Important, "true or false")
		case "metadata":
			e.SetMetadata = true
			if !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
				if err = decodeField(k, raw, &e.Metadata, "an object (or null to clear it)"); err == nil {
					e.Metadata, err = metadataIn(e.Metadata)
					if err != nil {
						err = memory.Errorf(memory.EINVALID, "metadata: %v", err)
					}
				}
			}
		default:
			if slices.Contains(fixedFields, k) {
				return e, memory.Errorf(memory.EINVALID, "%s: cannot be changed; PATCH /v1/messages/{id} takes %v (to replace a message, delete it and store a new one)", k, patchFields)
			}
			return e, memory.Errorf(memory.EINVALID, "unknown field %q: PATCH /v1/messages/{id} takes %v", k, patchFields)
		}
		if err != nil {
			return e, err
		}
	}
	return e, nil
}

// decodeField decodes one field's raw JSON into dst; null counts as the
// wrong type (only metadata may be null, and is handled apart).
func decodeField(name string, raw json.RawMessage, dst any, want string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) || dec.Decode(dst) != nil {
		return memory.Errorf(memory.EINVALID, "%s: must be %s, not %s", name, want, truncateJSON(raw))
	}
	return nil
}

func truncateJSON(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// deleteMessage answers DELETE /v1/messages/:id[?group=true]: 204.
func (s *Server) deleteMessage(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	group, err := queryBool(c, "group")
	if err != nil {
		return err
	}
	if _, err := s.svc.DeleteMessage(c.Request().Context(), id, group); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// idempotencyKey reads the Idempotency-Key header: "" when absent.
func idempotencyKey(c echo.Context) (string, error) {
	vals := c.Request().Header.Values(api.IdempotencyKeyHeader)
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
		return vals[0], memory.ValidateIdempotencyKey(vals[0])
	}
	return "", memory.Errorf(memory.EINVALID, "Idempotency-Key: sent %d times; send it once", len(vals))
}

// contextFormat is the format asked by the query (?format=) or the body
// ("format"); both may be given only if they agree.
func contextFormat(c echo.Context, in api.ContextIn) (string, error) {
	q, b := c.QueryParam("format"), in.Format
	if q != "" && b != "" && q != b {
		return "", memory.Errorf(memory.EINVALID, "format: ?format=%s and the body's %q differ: give one", q, b)
	}
	f := b
	if q != "" {
		f = q
	}
	switch f {
	case "", api.FormatCtxd:
		return api.FormatCtxd, nil
	case api.FormatOpenAI:
		return api.FormatOpenAI, nil
	}
	return "", memory.Errorf(memory.EINVALID, "format: %q is not one of ctxd (the default), openai", f)
}

// toChatMessage is the window message as sent to the model (a pruned tool
// result as pruned). OpenAI requires each tool call's type, which clients
// may have left out when storing: it is "function", the only type.
func toChatMessage(m *memory.Message) api.ChatMessage {
	out := api.ChatMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
	if len(m.ToolCalls) > 0 {
		out.ToolCalls = slices.Clone(m.ToolCalls)
		for i := range out.ToolCalls {
			if out.ToolCalls[i].Type == "" {
				out.ToolCalls[i].Type = "function"
			}
		}
	}
	return out
}

func toContextChatOut(res *memory.ContextResult) api.ContextChat {
	out := api.ContextChat{Messages: make([]api.ChatMessage, len(res.Messages)), Tokens: res.Tokens, StablePrefix: res.StablePrefix, StableUntil: res.StableUntil,
		Recovered: res.Recovered, AnswerOnly: res.AnswerOnly, Budget: res.Budget}
	for i, m := range res.Messages {
		out.Messages[i] = toChatMessage(m.Message)
	}
	return out
}
