package httpapi

import (
	"net/http"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

func (s *Server) putSession(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	var in api.SessionIn
	if c.Request().ContentLength != 0 {
		if err := s.decode(c, &in); err != nil {
			return err
		}
	}
	md, err := metadataIn(in.Metadata)
	if err != nil {
		return memory.Errorf(memory.EINVALID, "metadata: %v", err)
	}
	pol, err := sessionPolicy(&in)
	if err != nil {
		return err
	}
	st, err := s.svc.PutSession(c.Request().Context(), id, memory.SessionUpdate{
		ContextWindow: in.ContextWindow, Encoding: in.Encoding, Metadata: md, Policy: &pol})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (s *Server) getSession(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	st, err := s.svc.GetSession(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (s *Server) listSessions(c echo.Context) error {
	limit, err := queryInt(c, "limit")
	if err != nil {
		return err
	}
	list, next, err := s.svc.ListSessions(c.Request().Context(), c.QueryParam("cursor"), limit)
	if err != nil {
		return err
	}
	if list == nil {
		list = []*memory.Status{}
	}
	return c.JSON(http.StatusOK, api.SessionList{Sessions: list, NextCursor: next})
}

func (s *Server) deleteSession(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	if err := s.svc.DeleteSession(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) appendMessages(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	var in api.AppendIn
	if err := s.decodeStrict(c, &in); err != nil {
		return err
	}
	msgs := make([]*memory.Message, len(in.Messages))
	for i := range in.Messages {
		if msgs[i], err = toMessage(&in.Messages[i], i); err != nil {
			return err
		}
	}
	res, err := s.svc.AppendWith(c.Request().Context(), id, msgs, memory.AppendOptions{IdempotencyKey: key})
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	return c.JSON(http.StatusCreated, api.AppendOut{IDs: res.IDs, Tokens: res.Tokens, Session: res.Session, Compaction: res.Compaction})
}

func (s *Server) listMessages(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit")
	if err != nil {
		return err
	}
	msgs, next, err := s.svc.ListMessages(c.Request().Context(), id, c.QueryParams()["state"], c.QueryParam("cursor"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, api.MessageList{Messages: toMessagesOut(msgs), NextCursor: next})
}

func (s *Server) search(c echo.Context) error {
	var in api.SearchIn
	if err := s.decode(c, &in); err != nil {
		return err
	}
	req := memory.SearchRequest{Query: in.Query, Sessions: in.Sessions, K: in.K, Mode: in.Mode, Neighbors: s.opts.SearchNeighbors}
	if in.Neighbors != nil {
		req.Neighbors = *in.Neighbors
	}
	if in.SessionID != "" {
		req.Sessions = append([]string{in.SessionID}, req.Sessions...)
	}
	var err error
	if req.States, err = memory.ParseStates(in.States); err != nil {
		return err
	}
	if req.Since, err = memory.ParseTime("since", in.Since); err != nil {
		return err
	}
	if req.Until, err = memory.ParseTime("until", in.Until); err != nil {
		return err
	}
	results, err := s.svc.Search(c.Request().Context(), req)
	if err != nil {
		return err
	}
	out := make([]api.SearchResult, len(results))
	for i, r := range results {
		out[i] = api.SearchResult{Message: toMessageOut(r.Message), Score: r.Score, Highlight: r.Highlight, Via: r.Via}
		if r.Via == "" {
			out[i].ScoreParts = &api.ScoreParts{Text: r.TextScore, Vector: r.VectorScore, Neighbor: r.NeighborScore, When: r.WhenScore,
				Author: r.AuthorWeight, Feedback: r.Feedback}
		}
	}
	return c.JSON(http.StatusOK, api.SearchOut{Results: out})
}

func (s *Server) compact(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	var in api.CompactIn
	if c.Request().ContentLength != 0 {
		if err := s.decode(c, &in); err != nil {
			return err
		}
	}
	rep, err := s.svc.Compact(c.Request().Context(), id, memory.CompactRequest{Prompt: in.Prompt, DryRun: in.DryRun})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

func (s *Server) listCold(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit")
	if err != nil {
		return err
	}
	oldest, err := memory.ParseOrder(c.QueryParam("order"))
	if err != nil {
		return err
	}
	msgs, next, err := s.svc.ListCold(c.Request().Context(), id, c.QueryParam("cursor"), limit, oldest)
	if err != nil {
		return err
	}
	out := make([]api.ColdChunk, len(msgs))
	for i, m := range msgs {
		out[i] = toColdOut(m)
	}
	return c.JSON(http.StatusOK, api.ColdList{Chunks: out, NextCursor: next})
}

func (s *Server) recoverMessage(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	mid, err := pathParam(c, "message_id")
	if err != nil {
		return err
	}
	m, err := s.svc.Recover(c.Request().Context(), id, mid, "", 0)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toMessageOut(m))
}

func (s *Server) context(c echo.Context) error {
	id, err := sessionID(c)
	if err != nil {
		return err
	}
	var in api.ContextIn
	if err := s.decode(c, &in); err != nil {
		return err
	}
	explain, err := queryBool(c, "explain")
	if err != nil {
		return err
	}
	format, err := contextFormat(c, in)
	if err != nil {
		return err
	}
	maxTokens := 0 // the domain's "the session's default"
	if in.MaxTokens != nil {
		if *in.MaxTokens == 0 {
			return memory.Errorf(memory.EINVALID, "max_tokens: 0 is not a budget; omit max_tokens (or send null) for the session's default, its context_window minus its reserve")
		}
		maxTokens = *in.MaxTokens
	}
	res, err := s.svc.Context(c.Request().Context(), id, memory.ContextRequest{Prompt: in.Prompt, MaxTokens: maxTokens, Explain: in.Explain || explain, Preview: in.DryRun})
	if err != nil {
		return err
	}
	if format == api.FormatOpenAI {
		return c.JSON(http.StatusOK, toContextChatOut(res))
	}
	out := api.Context{Messages: make([]api.WindowMessage, len(res.Messages)), Tokens: res.Tokens, StablePrefix: res.StablePrefix, StableUntil: res.StableUntil, Recovered: res.Recovered,
		AnswerOnly: res.AnswerOnly, Budget: res.Budget, WouldCompact: res.WouldCompact}
	for i, m := range res.Messages {
		out.Messages[i] = api.WindowMessage{Message: toMessageOut(m.Message), Source: m.Source, Score: m.Score,
			Components: m.Components, PruneLevel: m.PruneLevel}
	}
	return c.JSON(http.StatusOK, out)
}
