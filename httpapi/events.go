package httpapi

import (
	"net/http"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

// getMessage answers GET /v1/messages/:id: one of the caller's messages,
// whatever its session.
func (s *Server) getMessage(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	m, err := s.svc.Message(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toMessageOut(m))
}

// listEvents answers GET /v1/events/:stream?session_id=&n=.
func (s *Server) listEvents(c echo.Context) error {
	stream, err := pathParam(c, "stream")
	if err != nil {
		return err
	}
	n, err := queryInt(c, "n")
	if err != nil {
		return err
	}
	events, err := s.svc.TailEvents(c.Request().Context(), memory.EventQuery{
		Stream: stream, SessionID: c.QueryParam("session_id"), N: n})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, api.EventList{Events: events})
}
