// Package server opens ctxd on a data dir and serves its HTTP API: the
// store, the indexes, the embedder, the summarizer, the event log and cold
// store, the service and httpapi, composed as `ctxd serve` runs them and as
// cmd/ctxd-bench runs them in its own process. Config is every setting of
// `ctxd serve`, with its flags, environment variables and config file.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"time"

	"github.com/ctxd/ctxd/coldstore"
	"github.com/ctxd/ctxd/eventlog"
	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/index/glove"
	"github.com/ctxd/ctxd/index/openai"
	"github.com/ctxd/ctxd/internal/version"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/admin"
	"github.com/ctxd/ctxd/memory/pgstore"
	"github.com/ctxd/ctxd/metrics"
	"github.com/ctxd/ctxd/summarize"
	"github.com/ctxd/ctxd/tokenizer"
	"github.com/spf13/pflag"
)

// Main is a running server: it opens the store, then the indexes, then the
// service, then HTTP, and closes them in reverse.
type Main struct {
	Config Config
	Logger *slog.Logger

	Store   memory.Store
	Index   *index.Index
	Service *memory.Service
	// Gateway is the model endpoints' domain side, which HTTP serves.
	Gateway *memory.Gateway
	Events  *eventlog.Log
	HTTP    *httpapi.Server
	Metrics *metrics.Metrics
	Addr    net.Addr // where HTTP listens, once Run returned

	serveErr chan error
}

// NewMain returns a Main for cfg.
func NewMain(cfg Config) *Main {
	return &Main{Config: cfg, Logger: NewLogger(cfg, os.Stderr)}
}

func NewLogger(cfg Config, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Run opens everything and starts serving on cfg.Addr (or on ln when given).
// It returns once the server answers requests.
func (m *Main) Run(ctx context.Context, ln net.Listener) (err error) {
	start := time.Now()
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	cfg := m.Config
	// Bind first: a port in use must fail before the data dir is created,
	// opened or indexed.
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
		}
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	// The encoding's ranks load while the store, the embedder and the index
	// open: it is the largest part of a start-up (~1 s of CPU on a
	// contended machine) and needs none of them. Every return below waits
	// for it, so no goroutine outlives a failed Run.
	tok := tokenizer.New()
	var warmErr error
	warmed := make(chan struct{})
	go func() {
		defer close(warmed)
		t0 := time.Now()
		if warmErr = tok.Warm(cfg.Encoding); warmErr == nil {
			m.Logger.Info("tokenizer ready", "encoding", cfg.Encoding, "took", time.Since(t0).Round(time.Millisecond))
		}
	}()
	defer func() { <-warmed }()
	var empty bool
	if m.Store, empty, err = m.openStore(ctx); err != nil {
		return err
	}
	if err = admin.CheckNoInterruptedImport(ctx, m.Store); err != nil {
		return err
	}
	emb, err := m.OpenEmbedder(ctx)
	if err != nil {
		return err
	}
	emb = m.instrument(emb)
	iopts, err := IndexOptions(cfg)
	if err != nil {
		return err
	}
	// An empty store next to an index got past refuseLostStore only with
	// --allow-empty-store: the index is behind nothing then.
	if m.Index, err = index.OpenOrRebuild(m.Logger, IndexPath(cfg.DataDir), iopts, m.Store, cfg.AllowStoreRollback || empty); err != nil {
		if errors.Is(err, index.ErrAhead) {
			return refuseRolledBack(cfg.DataDir, err)
		}
		return err
	}
	if <-warmed; warmErr != nil {
		return warmErr
	}
	// On a database the nodes share, the event log is in it, and there is
	// no cold mirror: the cold originals are rows of the database (its
	// backups keep them), and each node's files held only what that node
	// compacted.
	var events interface {
		memory.EventLog
		memory.EventReader
	}
	var cold memory.ColdMirror
	if pg, ok := m.Store.(*pgstore.Store); ok {
		events = pg.Events(cfg.Clock)
	} else {
		if m.Events, err = eventlog.Open(LogsPath(cfg.DataDir), eventlog.Options{Now: cfg.Clock}); err != nil {
			return err
		}
		mirror, err := coldstore.Open(ColdPath(cfg.DataDir))
		if err != nil {
			return err
		}
		events, cold = m.Events, coldstore.Mirror{Store: mirror}
	}
	summ, err := m.openSummarizer(tok, emb)
	if err != nil {
		return err
	}
	m.Service = &memory.Service{
		Store: m.Store, Index: m.Index, Embedder: emb, Tokenizer: tok, Logger: m.Logger, Now: cfg.Clock,
		Summarizer: m.Metrics.Summarizer(summ), Cold: cold, Events: m.Metrics.EventLog(events), EventReader: events, Policy: cfg.Policy,
		Shares:      memory.Shares{Summary: cfg.ShareSummary, Recovered: cfg.ShareRecovered},
		RecoverNext: cfg.RecoverNext, PurgeInterval: cfg.PurgeInterval, NoFeedback: cfg.FeedbackWeight <= 0,
		Limits: memory.Limits{
			MaxMessagesPerCall: cfg.MaxMessagesPerCall, MaxContentBytes: cfg.MaxContentBytes,
			MaxMetadataKeys: memory.DefaultLimits.MaxMetadataKeys, MaxMetadataBytes: memory.DefaultLimits.MaxMetadataBytes,
		},
		Defaults:    memory.Defaults{ContextWindow: cfg.ContextWindow, Encoding: cfg.Encoding},
		Reembed:     cfg.Reembed,
		Concurrency: memory.Concurrency{Compactions: cfg.MaxCompactions, Embeds: cfg.MaxEmbeds},
		SharedStore: SharedStore(cfg.Store),
	}
	t0 := time.Now()
	if err := m.Service.Open(ctx); err != nil {
		return fmt.Errorf("open service: %w", err)
	}
	m.Logger.Info("service open: embedder model checked, index caught up with the store, cold mirror reconciled",
		"took", time.Since(t0).Round(time.Millisecond))
	m.Gateway = memory.NewGateway(m.Service)
	m.HTTP = httpapi.New(m.Service, httpapi.Options{BodyLimit: cfg.BodyLimit, Logger: m.Logger, LogContent: cfg.LogContent,
		SearchNeighbors: cfg.SearchNeighbors, Keys: cfg.Keys, RateLimit: cfg.RateLimit, RateBurst: cfg.RateBurst, Limiter: sharedLimiter(m.Store, cfg),
		RequestTimeout: cfg.RequestTimeout, ReadHeaderTimeout: cfg.ReadHeaderTimeout, ReadTimeout: cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout, MaxHeaderBytes: cfg.MaxHeaderBytes,
		MaxConns: cfg.MaxConns, MaxConnsPerIP: cfg.MaxConnsPerIP, BodyBytesInFlight: cfg.MaxBodyInFlight,
		WorkSlots: cfg.MaxWorking, WorkQueue: cfg.MaxWaiting, WorkWait: cfg.MaxWait,
		Version: version.Get().String(), Now: cfg.Clock,
		Gateway: httpapi.GatewayOptions{
			OpenAI:    httpapi.Upstream{URL: cfg.UpstreamOpenAIURL, Key: os.Getenv("CTXD_UPSTREAM_OPENAI_API_KEY")},
			Anthropic: httpapi.Upstream{URL: cfg.UpstreamAnthropicURL, Key: os.Getenv("CTXD_UPSTREAM_ANTHROPIC_API_KEY")},
			FlushTurn: cfg.GatewayFlush,
		},
		Conversations: m.Gateway})
	m.Addr = ln.Addr()
	m.serveErr = make(chan error, 1)
	m.serveMetrics()
	go func() { m.serveErr <- m.HTTP.Serve(ln) }()
	if cfg.PprofAddr != "" {
		go func() {
			// http.DefaultServeMux holds the handlers net/http/pprof registers.
			m.Logger.Warn("pprof server stopped", "err", http.ListenAndServe(cfg.PprofAddr, nil))
		}()
	}
	m.Logger.Info("ctxd listening", "addr", m.Addr.String(), "data_dir", cfg.DataDir, "store", storeName(cfg), "version", version.Get().String(),
		"embedder", emb.Model(), "started_in", time.Since(start).Round(time.Millisecond))
	return nil
}

// Failed receives the error that stops a server after Run returned (see
// memory.Service.Failed); the caller closes it and exits with the error.
func (m *Main) Failed() <-chan error { return m.Service.Failed() }

// OpenEmbedder opens the embedder the config names: the embedded GloVe
// model, or an OpenAI-compatible API (the admin verbs embed with it too).
func (m *Main) OpenEmbedder(ctx context.Context) (memory.Embedder, error) {
	cfg := m.Config
	if cfg.EmbedURL == "" {
		return glove.Default()
	}
	key := os.Getenv("CTXD_EMBED_API_KEY")
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	return openai.NewEmbedder(ctx, openai.Config{BaseURL: cfg.EmbedURL, Model: cfg.EmbedModel, APIKey: key,
		Dim: cfg.EmbedDim, BatchSize: cfg.EmbedBatch, Timeout: cfg.EmbedTimeout})
}

func (m *Main) openSummarizer(tok memory.Tokenizer, emb memory.Embedder) (memory.Summarizer, error) {
	extractive := summarize.NewExtractive(tok, emb)
	if m.Config.SummaryURL == "" {
		return extractive, nil
	}
	key := os.Getenv("CTXD_SUMMARY_API_KEY")
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	return summarize.NewLLM(summarize.LLMConfig{BaseURL: m.Config.SummaryURL, Model: m.Config.SummaryModel,
		APIKey: key, Timeout: m.Config.SummaryTimeout}, tok, extractive)
}

// IndexOptions are the index settings of cfg. Query expansion uses the
// embedded GloVe model whatever the embedder: it proposes words, not vectors.
func IndexOptions(cfg Config) (index.Options, error) {
	o := index.Options{Fusion: cfg.Fusion, VectorWeight: cfg.VectorWeight, ExpansionWeight: cfg.ExpansionWeight,
		FeedbackWeight: cfg.FeedbackWeight}
	if cfg.FeedbackWeight <= 0 {
		o.FeedbackWeight = -1 // the index's 0 is its default
	}
	if cfg.ExpansionWeight <= 0 {
		return o, nil
	}
	var err error
	o.Expander, err = index.GloveExpander()
	return o, err
}

// Close shuts HTTP down (finishing requests in flight), then the service,
// the index and the store.
func (m *Main) Close() error {
	var errs []error
	if m.HTTP != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.Config.ShutdownTimeout)
		errs = append(errs, m.HTTP.Shutdown(ctx))
		cancel()
		if m.serveErr != nil {
			errs = append(errs, <-m.serveErr)
		}
	}
	if m.Service != nil {
		errs = append(errs, m.Service.Close())
	}
	if m.Index != nil {
		errs = append(errs, m.Index.Close())
	}
	if m.Events != nil {
		errs = append(errs, m.Events.Close())
	}
	if m.Store != nil {
		errs = append(errs, m.Store.Close())
	}
	return errors.Join(errs...)
}

// DefaultConfig is `ctxd serve` given no flag, variable or file.
func DefaultConfig() Config {
	var cfg Config
	BindFlags(pflag.NewFlagSet("defaults", pflag.ContinueOnError), &cfg)
	return cfg
}

// RunLocal opens a Main of cfg serving on a free loopback port (cfg.Addr is
// not used); the caller closes it.
func RunLocal(ctx context.Context, cfg Config) (*Main, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	m := NewMain(cfg)
	if err := m.Run(ctx, ln); err != nil {
		ln.Close() // Run serves on ln only once it succeeded
		return nil, err
	}
	return m, nil
}
