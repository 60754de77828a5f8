// Package httpapi serves the ctxd API (docs/API.md) over echo. It
// translates between the wire and memory.Service and holds no domain rules.
package httpapi

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/ui"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/time/rate"
)

// DefaultBodyLimit is the largest request body accepted.
const DefaultBodyLimit = 8 << 20

// Options configures a Server.
type Options struct {
	BodyLimit  int64 // bytes; DefaultBodyLimit when 0
	Logger     *slog.Logger
	LogContent bool // log request bodies (message content); off by default
	// SearchNeighbors is the search's "neighbors" when a request does not say.
	SearchNeighbors int
	// Keys are the API keys; none: no auth, every caller is the default tenant.
	Keys []Key
	// RateLimit is requests per second per key (per client IP without keys),
	// with bursts of RateBurst; 0 turns limiting off.
	RateLimit float64
	RateBurst int
	// Limiter, when set, keeps the rate limits (RateLimit, RateBurst)
	// instead of this server's memory: nodes on one database share theirs.
	Limiter middleware.RateLimiterStore
	// RequestTimeout cancels a request's work after this long; 0: never.
	RequestTimeout time.Duration

	// The http.Server's limits, 0 meaning none (net/http's own meaning):
	// ReadHeaderTimeout bounds the headers; ReadTimeout the whole request,
	// body included (a body read past it answers 408); WriteTimeout the
	// answer, from the end of the headers; IdleTimeout a kept-alive
	// connection between requests.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes caps request headers (net/http's 1 MiB when 0); more
	// answers 431 with the JSON error.
	MaxHeaderBytes int
	// MaxConns and MaxConnsPerIP cap open connections, in total and per
	// client address; one over a cap is answered 503 and closed. 0: no cap.
	MaxConns, MaxConnsPerIP int
	// BodyBytesInFlight caps the request body bytes handled at once (a body
	// of unknown length counts as BodyLimit); a request over it answers 503
	// with Retry-After. 0: no cap.
	BodyBytesInFlight int64
	// WorkSlots bounds the API's requests (not the model endpoints', MCP's,
	// the export's or the dashboard's) doing work at once; the others wait
	// in turn, up to WorkQueue of them for at most WorkWait each, and past
	// either answer 503 with Retry-After. 0: no bound.
	WorkSlots int
	WorkQueue int
	WorkWait  time.Duration
	// Gateway configures the model endpoints (POST /v1/chat/completions,
	// POST /v1/messages).
	Gateway GatewayOptions
	// Conversations is the domain side of the model endpoints (which
	// session, what is stored, the window), built where the server is
	// composed (internal/server). nil: one on svc, for callers that compose
	// no server (tests of other packages).
	Conversations *memory.Gateway
	// Version is the running build (internal/version), shown by /healthz
	// and the dashboard's footer.
	Version string
	// Now is the server's clock, for the dashboard's "3 min ago"; time.Now
	// when nil.
	Now func() time.Time
}

// Server is the HTTP front of a memory.Service.
type Server struct {
	svc     *memory.Service
	opts    Options
	e       *echo.Echo
	h       http.Handler
	limiter middleware.RateLimiterStore
	bodies  *bodyBudget // nil: no cap
	work    *workSlots  // nil: no bound
	gateway *memory.Gateway
	// responseIDs name stored answers for previous_response_id.
	responseIDs responseIDs
	// decodedOpenAI and decodedAnthropic are the client messages of
	// recent calls, decoded (see gateway_decode.go).
	decodedOpenAI, decodedAnthropic decodedCache
	// lists are the histories of recent calls, as sent (gateway_lists.go).
	lists listCache

	// mu orders Serve's setting up of echo's http.Server with Shutdown,
	// which another goroutine calls: without it, a Shutdown right after
	// Serve began raced with it, and could stop echo's unused default
	// server and leave Serve running. down: Shutdown was called.
	mu   sync.Mutex
	down bool
}

//go:embed openapi.json
var openapiJSON []byte

// New builds the routes for svc.
func New(svc *memory.Service, opts Options) *Server {
	if opts.Gateway.BodyLimit <= 0 {
		opts.Gateway.BodyLimit = DefaultGatewayBodyLimit
	}
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = DefaultBodyLimit
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Conversations == nil {
		opts.Conversations = memory.NewGateway(svc)
	}
	s := &Server{svc: svc, opts: opts, e: echo.New(), gateway: opts.Conversations}
	s.h = headAsGet(s.e)
	if opts.BodyBytesInFlight > 0 {
		s.bodies = &bodyBudget{max: opts.BodyBytesInFlight}
	}
	if opts.WorkSlots > 0 {
		s.work = newWorkSlots(opts.WorkSlots, max(opts.WorkQueue, 0), max(opts.WorkWait, time.Second))
	}
	if opts.RateLimit > 0 && opts.Limiter != nil {
		s.limiter = opts.Limiter
	} else if opts.RateLimit > 0 {
		s.limiter = middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
			Rate: rate.Limit(opts.RateLimit), Burst: max(opts.RateBurst, 1), ExpiresIn: 3 * time.Minute})
	}
	e := s.e
	e.HideBanner, e.HidePort = true, true
	// Without a trusted proxy in front, X-Forwarded-For is the client's to forge.
	e.IPExtractor = echo.ExtractIPDirect()
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RequestID())
	e.Use(s.requestContext)
	if opts.LogContent {
		e.Use(captureBody)
	}
	e.Use(middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURI: true, LogMethod: true, LogLatency: true, LogRequestID: true, LogError: true,
		HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			if v.Status >= 500 {
				level = slog.LevelError
			}
			ctx := c.Request().Context()
			uri := v.URI
			if !opts.LogContent {
				uri = redactQuery(uri)
			}
			attrs := []slog.Attr{slog.String("method", v.Method), slog.String("uri", uri), slog.Int("status", v.Status),
				slog.Duration("latency", v.Latency), slog.String("request_id", v.RequestID),
				slog.String("tenant", memory.TenantFromContext(ctx))}
			if b, ok := c.Get(bodyKey).(*headBuffer); ok {
				attrs = append(attrs, slog.String("body", b.String()))
			}
			s.opts.Logger.LogAttrs(ctx, level, "request", attrs...)
			return nil
		},
	}))
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
		s.opts.Logger.Error("panic in handler", "err", err, "stack", string(stack))
		return err
	}}))
	// After the logger, so a refused query string is logged like any 400.
	e.Use(checkQuery)

	e.GET("/healthz", s.healthz)
	e.GET("/favicon.ico", echo.WrapHandler(http.HandlerFunc(ui.Favicon)))
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.json", s.openapi, s.admit)

	// Middleware goes on routes, not on the group: a group with middleware
	// catches every unknown method as 404 and 405 is lost.
	v1 := e.Group("/v1")
	// Authentication and the rate limit come before the body is read.
	mw := []echo.MiddlewareFunc{s.admit}
	if opts.RequestTimeout > 0 {
		mw = append(mw, middleware.ContextTimeoutWithConfig(middleware.ContextTimeoutConfig{Timeout: opts.RequestTimeout}))
	}
	body := append(mw[:len(mw):len(mw)], s.limitBody)
	// MCP takes its body as the API does, not its work slots: a session may
	// hold its stream open.
	mcpBody := body
	if s.work != nil {
		mw, body = append(mw, s.limitWork), append(body, s.limitWorkAfterBody)
	}
	v1.GET("/sessions", s.listSessions, mw...)
	v1.PUT("/sessions/:id", s.putSession, body...)
	v1.GET("/sessions/:id", s.getSession, mw...)
	v1.DELETE("/sessions/:id", s.deleteSession, mw...)
	v1.POST("/sessions/:id/messages", s.appendMessages, body...)
	v1.GET("/sessions/:id/messages", s.listMessages, mw...)
	v1.POST("/search", s.search, body...)
	v1.POST("/sessions/:id/compact", s.compact, body...)
	v1.POST("/sessions/:id/context", s.context, body...)
	v1.GET("/sessions/:id/cold", s.listCold, mw...)
	// Recover takes no body: none is read, so none is limited.
	v1.POST("/sessions/:id/messages/:message_id/recover", s.recoverMessage, mw...)
	v1.GET("/messages/:id", s.getMessage, mw...)
	v1.PATCH("/messages/:id", s.patchMessage, body...)
	v1.DELETE("/messages/:id", s.deleteMessage, mw...)
	v1.GET("/events/:stream", s.listEvents, mw...)
	s.mountMCP(mcpBody)
	// Without the request timeout: an export takes as long as the store is
	// large; the export bounds each write instead (DefaultExportStall).
	v1.GET("/export", s.export, s.admit)
	// The model endpoints take ctxd's key from X-Ctxd-Key (Authorization is
	// the provider's) and no request timeout: a streamed answer may take
	// longer than any bound set for ctxd's own calls. POST /v1/messages is
	// its own route; /v1/messages/:id (a stored message) does not match it.
	gw := []echo.MiddlewareFunc{s.admitGateway, s.limitBodyTo(max(opts.Gateway.BodyLimit, opts.BodyLimit))}
	v1.POST("/chat/completions", s.chatCompletions, gw...)
	v1.POST("/messages", s.anthropicMessages, gw...)
	v1.POST("/responses", s.responses, gw...)
	v1.POST("/responses/compact", s.responsesCompact, gw...)
	v1.POST("/messages/count_tokens", s.countTokens, gw...)
	v1.GET("/models", s.models, s.admitGateway)

	// The dashboard checks keys itself (a browser sends its key in a
	// cookie, and is sent to a login page rather than answered 401), with
	// the API's keys and rate limit; its bodies are limited like any, and
	// take their share of the in-flight budget only once admitted.
	dash := echo.WrapHandler(ui.New(svc, ui.Options{Admit: s.uiAdmit, TakeBody: s.takeBody, KeysRequired: len(opts.Keys) > 0,
		SearchNeighbors: opts.SearchNeighbors, Logger: opts.Logger, Version: opts.Version, Now: opts.Now}))
	e.Any("/ui", dash)
	e.Any("/ui/*", dash)
	return s
}

// Handler is the server as an http.Handler.
func (s *Server) Handler() http.Handler { return s.h }

// Conversations is the model endpoints' domain side the server uses.
func (s *Server) Conversations() *memory.Gateway { return s.gateway }

// Echo exposes the router, for adding routes (metrics) from the binary.
func (s *Server) Echo() *echo.Echo { return s.e }

// Serve answers on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		return ln.Close()
	}
	s.e.Listener = ln
	o := s.opts
	srv := &http.Server{Handler: s.h, ReadHeaderTimeout: o.ReadHeaderTimeout, ReadTimeout: o.ReadTimeout,
		WriteTimeout: o.WriteTimeout, IdleTimeout: o.IdleTimeout, MaxHeaderBytes: o.MaxHeaderBytes}
	s.e.Server = srv
	s.mu.Unlock()
	limits := &connLimits{max: o.MaxConns, perIP: o.MaxConnsPerIP, byIP: map[string]int{}}
	err := srv.Serve(&limitedListener{Listener: ln, limits: limits})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections and waits for requests in flight, so
// writes already being acknowledged finish.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.down = true
	s.mu.Unlock()
	return s.e.Shutdown(ctx)
}

// requestContext puts the request id in the context, for the domain's logs,
// and marks every answer neither sniffable nor cacheable.
func (s *Server) requestContext(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Response().Header().Get(echo.HeaderXRequestID)
		// Answers carry stored content and are the caller's own: no
		// browser may sniff one into another type, and no cache (a shared
		// proxy's, the browser's) may keep one.
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set(echo.HeaderCacheControl, "no-store")
		r := c.Request()
		c.SetRequest(r.WithContext(memory.NewContextWithRequestID(r.Context(), id)))
		return next(c)
	}
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, api.Health{Status: "ok", Version: s.opts.Version})
}

func (s *Server) readyz(c echo.Context) error {
	if err := s.svc.Ready(c.Request().Context()); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, api.Ready{Status: "ready", IndexLag: s.svc.IndexLag(c.Request().Context())})
}

func (s *Server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapiJSON)
}

// redactQuery takes a search's words out of a logged URI (the dashboard's
// GET /ui/search?q=...): they are message content, which the log holds
// only with --log-content.
func redactQuery(uri string) string {
	path, query, ok := strings.Cut(uri, "?")
	if !ok || !strings.Contains(query, "q=") {
		return uri
	}
	vals, err := url.ParseQuery(query)
	if err != nil {
		return path + "?(unreadable query)"
	}
	if vals.Has("q") {
		vals.Set("q", "REDACTED")
	}
	return path + "?" + vals.Encode()
}
