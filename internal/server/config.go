package server

import (
	"fmt"
	"math"
	"net"
	"os"
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/index/openai"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// Config is everything `ctxd serve` can be told. Each field is one flag; the
// same setting comes from the environment as CTXD_<FLAG_NAME> and from the
// YAML config file under <flag_name>, with flags winning over the environment
// over the file over the defaults.
type Config struct {
	// Clock is the server's one clock: message times, ids, retention and
	// the event log's stamps all read it. Nil is the real clock; tests pin a
	// date with it (servertest.Clock) so that no result depends on the day.
	Clock func() time.Time

	Addr                 string
	DataDir              string
	Store                string
	LogFormat            string
	LogLevel             string
	LogContent           bool
	BodyLimit            int64
	MaxMessagesPerCall   int
	MaxContentBytes      int
	ContextWindow        int
	Encoding             string
	EmbedURL             string
	EmbedModel           string
	EmbedDim             int
	EmbedBatch           int
	EmbedTimeout         time.Duration
	Reembed              bool
	AllowEmptyStore      bool
	AllowStoreRollback   bool
	Fusion               string
	VectorWeight         float64
	ExpansionWeight      float64
	FeedbackWeight       float64
	ShutdownTimeout      time.Duration
	PprofAddr            string
	SummaryURL           string
	SummaryModel         string
	SummaryTimeout       time.Duration
	UpstreamOpenAIURL    string
	UpstreamAnthropicURL string
	GatewayFlush         bool
	ShareSummary         float64
	ShareRecovered       float64
	RecoverNext          bool
	PurgeInterval        time.Duration
	SearchNeighbors      int
	APIKeys              string
	AllowRemote          bool
	RateLimit            float64
	RateBurst            int
	RequestTimeout       time.Duration
	ReadHeaderTimeout    time.Duration
	ReadTimeout          time.Duration
	WriteTimeout         time.Duration
	IdleTimeout          time.Duration
	MaxHeaderBytes       int
	MaxConns             int
	MaxConnsPerIP        int
	MaxBodyInFlight      int64
	MaxWorking           int
	MaxWaiting           int
	MaxWait              time.Duration
	MaxCompactions       int
	MaxEmbeds            int
	DecodeCacheBytes     int
	DiskReserve          int64
	DiskReservePct       float64
	DiskSpare            int64
	Metrics              bool
	Policy               memory.Policy

	// Keys are --api-keys plus the config file's keys section.
	Keys []httpapi.Key
}

// BindFlags declares the flags with their defaults.
func BindFlags(fs *pflag.FlagSet, c *Config) {
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.DataDir, "data-dir", "./ctxd-data", "directory for the store, indexes and logs")
	fs.StringVar(&c.Store, "store", "", "the system of record: empty for the embedded store in --data-dir, or a PostgreSQL URL (postgres://user:pass@host:5432/db?sslmode=require; the URL may set statement_timeout in ms, default 30000) that several ctxd nodes share, each keeping its search index, event log and cold mirror in its own --data-dir. Prefer CTXD_STORE or the config file to a flag when it holds a password")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&c.LogContent, "log-content", false, "include message content in logs")
	fs.Int64Var(&c.BodyLimit, "body-limit", 8<<20, "largest request body in bytes")
	fs.IntVar(&c.MaxMessagesPerCall, "max-messages-per-call", 1000, "most messages in one POST")
	fs.IntVar(&c.MaxContentBytes, "max-content-bytes", 1<<20, "largest message content in bytes")
	fs.IntVar(&c.ContextWindow, "context-window", 128000, "default context window of new sessions, in tokens")
	fs.StringVar(&c.Encoding, "encoding", "o200k_base", "default token encoding of new sessions: o200k_base or cl100k_base")
	fs.StringVar(&c.EmbedURL, "embed-url", "", "OpenAI-compatible embeddings endpoint (e.g. http://127.0.0.1:11434/v1); empty: the built-in GloVe model. Key from CTXD_EMBED_API_KEY or OPENAI_API_KEY")
	fs.StringVar(&c.EmbedModel, "embed-model", "text-embedding-3-small", "embedding model name at --embed-url")
	fs.IntVar(&c.EmbedDim, "embed-dim", 0, "embedding dimension at --embed-url (0: ask the endpoint at start)")
	fs.IntVar(&c.EmbedBatch, "embed-batch", openai.DefaultBatchSize, "texts per embeddings request (at most 512 KiB of text each)")
	fs.DurationVar(&c.EmbedTimeout, "embed-timeout", 30*time.Second, "timeout of one embeddings request")
	fs.BoolVar(&c.Reembed, "reembed", false, "re-embed every stored message when the data dir was embedded by another model")
	fs.BoolVar(&c.AllowEmptyStore, "allow-empty-store", false, "start with a missing or empty store even though the data dir's index or cold mirror holds data (otherwise start refuses: the store was lost)")
	fs.BoolVar(&c.AllowStoreRollback, "allow-store-rollback", false, "start although the full-text index holds changes the store does not (the store lost its newest writes, or is an older copy): the index is moved aside and rebuilt from the store as it is (otherwise start refuses, and `ctxd verify` names the messages the store lost)")
	fs.StringVar(&c.Fusion, "fusion", "", "hybrid search fusion: minmax or rrf (default: the index's measured default)")
	fs.Float64Var(&c.VectorWeight, "vector-weight", 0, "weight of the vector side in hybrid search, 0..1 (0: the index's default)")
	fs.Float64Var(&c.ExpansionWeight, "expansion-weight", index.DefaultExpansionWeight, "weight of query expansion words (a query word's nearest GloVe words) in full-text search, against 1 for the query's own words; 0: off")
	fs.Float64Var(&c.FeedbackWeight, "feedback-weight", index.DefaultFeedbackWeight, "weight of the most distinctive terms of a hybrid search's best first results (pseudo-relevance feedback, searches of 1-4 sessions) in its second search, against 1 for the query's own words (its vector moves towards theirs too); 0: off (one search)")
	fs.StringVar(&c.PprofAddr, "pprof-addr", "", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); empty: off")
	fs.StringVar(&c.SummaryURL, "summary-url", "", "OpenAI-compatible chat endpoint for summaries (e.g. http://127.0.0.1:11434/v1); empty: the built-in extractive summarizer. Key from CTXD_SUMMARY_API_KEY or OPENAI_API_KEY")
	fs.StringVar(&c.SummaryModel, "summary-model", "gpt-4o-mini", "chat model at --summary-url")
	fs.DurationVar(&c.SummaryTimeout, "summary-timeout", 60*time.Second, "timeout of one summary request")
	fs.StringVar(&c.UpstreamOpenAIURL, "upstream-openai-url", "", "base URL of the OpenAI-compatible API that POST /v1/chat/completions forwards to, as the OpenAI SDK takes it (ending in /v1, e.g. https://api.openai.com/v1); empty: the endpoint answers 404. The caller's Authorization is passed on, else CTXD_UPSTREAM_OPENAI_API_KEY")
	fs.BoolVar(&c.GatewayFlush, "gateway-flush", true, "before a compaction, the gateway endpoints give the model one extra turn, unseen by the client, to save notes (pinned) with a save_memory tool; once per compaction cycle")
	fs.StringVar(&c.UpstreamAnthropicURL, "upstream-anthropic-url", "", "base URL of the Anthropic API that POST /v1/messages forwards to, as the Anthropic SDK takes it (no /v1, e.g. https://api.anthropic.com); empty: the endpoint answers 404. The caller's x-api-key is passed on, else CTXD_UPSTREAM_ANTHROPIC_API_KEY")
	fs.Float64Var(&c.ShareSummary, "share-summary", memory.DefaultShares.Summary, "share of the context budget summaries use first")
	fs.Float64Var(&c.ShareRecovered, "share-recovered", memory.DefaultShares.Recovered, "share of the context budget recovered cold messages use first")
	fs.BoolVar(&c.RecoverNext, "recover-next", true, "recover the turn after a recovered one with it")
	fs.DurationVar(&c.PurgeInterval, "purge-interval", time.Hour, "how often cold chunks past recoverable_for_days are purged")
	fs.IntVar(&c.SearchNeighbors, "search-neighbors", 0, "search brings the turn after each of its first N results (a request's \"neighbors\" wins)")
	fs.StringVar(&c.APIKeys, "api-keys", "", "API keys as tenant:key,tenant2:key2 (a key may be sha256:HEX; tenant * is an admin key that may act as any tenant with the X-Ctxd-Tenant header); empty: no auth, loopback only. Prefer CTXD_API_KEYS or the config file's keys section to a flag")
	fs.BoolVar(&c.AllowRemote, "allow-remote", false, "listen on a non-loopback address even without API keys")
	fs.Float64Var(&c.RateLimit, "rate-limit", 500, "requests per second per API key (per client IP without keys); 0: off")
	fs.IntVar(&c.RateBurst, "rate-burst", 1000, "requests a key may send at once above --rate-limit")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", 2*time.Minute, "cancel a request's work after this long (answers 503); 0: never")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "close a connection whose request headers take longer than this; 0: never")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", time.Minute, "answer 408 and close when a request's headers and body take longer than this to arrive (a slow or stalled client); 0: never")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", 0, "give up on writing an answer this long after the request's headers arrived (it counts the request's work: keep it above --request-timeout); 0: never")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 2*time.Minute, "close a kept-alive connection idle for this long")
	fs.IntVar(&c.MaxHeaderBytes, "max-header-bytes", 64<<10, "largest request headers in bytes (more answers 431)")
	fs.IntVar(&c.MaxConns, "max-conns", 1024, "open connections at most; one more is answered 503 and closed; 0: no cap")
	fs.IntVar(&c.MaxConnsPerIP, "max-conns-per-ip", 256, "open connections at most from one client address; 0: no cap")
	fs.Int64Var(&c.MaxBodyInFlight, "max-body-bytes-in-flight", 16<<20, "request body bytes handled at once (a body of unknown length counts as --body-limit); a request over it answers 503 with Retry-After, though one body alone is always taken; 0: no cap")
	fs.IntVar(&c.MaxWorking, "max-working", 2*runtime.GOMAXPROCS(0), "API requests (search, context, writes, reads; not the model endpoints, MCP or the export) doing work at once; the others wait their turn, first come first served; 0: no bound")
	fs.IntVar(&c.MaxWaiting, "max-waiting", 1024, "API requests that may wait for --max-working; one more is answered 503 with Retry-After")
	fs.DurationVar(&c.MaxWait, "max-wait", 30*time.Second, "the longest an API request waits for --max-working; then it is answered 503 with Retry-After")
	fs.IntVar(&c.MaxCompactions, "max-compactions", 2, "compactions running at once across sessions")
	fs.IntVar(&c.MaxEmbeds, "max-embeds", 4, "embedding calls running at once")
	fs.IntVar(&c.DecodeCacheBytes, "decode-cache-bytes", boltstore.DefaultDecodeCacheBytes, "bytes of decoded messages (with their records) kept, in each of the cache's two generations, so that a context call does not decode its window again; 0: none")
	fs.Int64Var(&c.DiskReserve, "disk-reserve", 256<<20, "refuse new messages (503) while the data dir's disk has less than this many bytes free, or --disk-reserve-pct of it, whichever is smaller")
	fs.Float64Var(&c.DiskReservePct, "disk-reserve-pct", 0.05, "see --disk-reserve")
	fs.Int64Var(&c.DiskSpare, "disk-spare", 1<<20, "bytes of a spare file (ctxd.db.spare) kept next to the store and given back when a delete finds the disk full, so sessions can be deleted to free space; 0: none")
	fs.BoolVar(&c.Metrics, "metrics", true, "serve Prometheus metrics at GET /metrics (unauthenticated)")
	bindPolicyFlags(fs, &c.Policy)
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for requests in flight")
}

// envName is the environment variable of a flag: data-dir -> CTXD_DATA_DIR.
func envName(flag string) string {
	return "CTXD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fileKey is the YAML key of a flag: data-dir -> data_dir.
func fileKey(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

// ApplyLayers fills every flag not given on the command line from the
// environment, else from the config file.
func ApplyLayers(fs *pflag.FlagSet, configPath string, getenv func(string) string) error {
	file := map[string]any{}
	if configPath != "" {
		b, err := os.ReadFile(configPath)
		if err != nil {
			return fmt.Errorf("read config %s: %w", configPath, err)
		}
		if err := yaml.Unmarshal(b, &file); err != nil {
			return fmt.Errorf("parse config %s: %w", configPath, err)
		}
		known := map[string]bool{keysSection: true}
		fs.VisitAll(func(f *pflag.Flag) { known[fileKey(f.Name)] = true })
		for k := range file {
			if !known[k] {
				return fmt.Errorf("config %s: unknown setting %q", configPath, k)
			}
		}
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "config" {
			return
		}
		var v string
		var from string
		if ev := getenv(envName(f.Name)); ev != "" {
			v, from = ev, envName(f.Name)
		} else if fv, ok := file[fileKey(f.Name)]; ok {
			v, from = fmt.Sprint(fv), configPath+": "+fileKey(f.Name)
		} else {
			return
		}
		if e := f.Value.Set(v); e != nil {
			err = fmt.Errorf("%s: %q is not a valid value for --%s: %v", from, v, f.Name, e)
		}
	})
	return err
}

// keysSection is the config file's list of API keys:
//
//	keys:
//	  - {tenant: acme, key: "..."}
//	  - {tenant: ops, sha256: "64 hex digits", admin: true}
const keysSection = "keys"

type keyEntry struct {
	Tenant string `yaml:"tenant"`
	Key    string `yaml:"key"`
	SHA256 string `yaml:"sha256"`
	Admin  bool   `yaml:"admin"`
}

// LoadKeys fills c.Keys from --api-keys and the config file's keys section.
func (c *Config) LoadKeys(configPath string) error {
	keys, err := httpapi.ParseKeys(c.APIKeys)
	if err != nil {
		return fmt.Errorf("api-keys: %w", err)
	}
	if configPath != "" {
		b, err := os.ReadFile(configPath)
		if err != nil {
			return fmt.Errorf("read config %s: %w", configPath, err)
		}
		var file struct {
			Keys []keyEntry `yaml:"keys"`
		}
		if err := yaml.Unmarshal(b, &file); err != nil {
			return fmt.Errorf("parse config %s: keys: %w", configPath, err)
		}
		for i, fk := range file.Keys {
			k, err := httpapi.NewKey(fk.Tenant, fk.Key, fk.SHA256, fk.Admin)
			if err != nil {
				return fmt.Errorf("config %s: keys[%d]: %w", configPath, i, err)
			}
			keys = append(keys, k)
		}
	}
	c.Keys = keys
	return nil
}

// Validate checks the values, naming the setting that is wrong.
func (c *Config) Validate() error {
	switch {
	case len(c.Keys) == 0 && !c.AllowRemote && !loopback(c.Addr):
		return fmt.Errorf("addr: %s is reachable from other machines and no API keys are set: set CTXD_API_KEYS (or a keys section in the config file), or --allow-remote to serve without auth", c.Addr)
	case c.RateLimit < 0 || c.RateBurst < 0:
		return fmt.Errorf("rate-limit, rate-burst: must not be negative")
	case c.ReadHeaderTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0:
		return fmt.Errorf("read-header-timeout, read-timeout, write-timeout, idle-timeout: must not be negative")
	case c.MaxHeaderBytes < 4096:
		return fmt.Errorf("max-header-bytes: %d is too small (at least 4096)", c.MaxHeaderBytes)
	case c.DiskSpare < 0:
		return fmt.Errorf("disk-spare: must not be negative")
	case c.MaxWorking < 0 || c.MaxWaiting < 0 || c.MaxWait < 0:
		return fmt.Errorf("max-working, max-waiting, max-wait: must not be negative")
	case c.MaxConns < 0 || c.MaxConnsPerIP < 0 || c.MaxBodyInFlight < 0:
		return fmt.Errorf("max-conns, max-conns-per-ip, max-body-bytes-in-flight: must not be negative")
	case c.MaxCompactions < 1 || c.MaxEmbeds < 1:
		return fmt.Errorf("max-compactions, max-embeds: must be at least 1")
	case c.DecodeCacheBytes < 0:
		return fmt.Errorf("decode-cache-bytes: must be 0 or more")
	case c.LogFormat != "text" && c.LogFormat != "json":
		return fmt.Errorf("log-format: %q is not text or json", c.LogFormat)
	case c.BodyLimit < 1024:
		return fmt.Errorf("body-limit: %d is too small", c.BodyLimit)
	case c.MaxMessagesPerCall < 1:
		return fmt.Errorf("max-messages-per-call: must be at least 1")
	case c.MaxContentBytes < 1:
		return fmt.Errorf("max-content-bytes: must be at least 1")
	case c.Encoding != "o200k_base" && c.Encoding != "cl100k_base":
		return fmt.Errorf("encoding: %q is not o200k_base or cl100k_base", c.Encoding)
	case c.ContextWindow < 256:
		return fmt.Errorf("context-window: %d is too small", c.ContextWindow)
	case c.VectorWeight < 0 || c.VectorWeight > 1:
		return fmt.Errorf("vector-weight: %v is outside 0..1", c.VectorWeight)
	case math.IsNaN(c.ExpansionWeight) || c.ExpansionWeight < 0 || c.ExpansionWeight > 10:
		return fmt.Errorf("expansion-weight: %v is outside 0..10", c.ExpansionWeight)
	case math.IsNaN(c.FeedbackWeight) || c.FeedbackWeight < 0 || c.FeedbackWeight > 10:
		return fmt.Errorf("feedback-weight: %v is outside 0..10", c.FeedbackWeight)
	case c.Fusion != "" && c.Fusion != "minmax" && c.Fusion != "rrf":
		return fmt.Errorf("fusion: %q is not minmax or rrf", c.Fusion)
	case c.DataDir == "":
		return fmt.Errorf("data-dir: must not be empty")
	case c.ShareSummary < 0 || c.ShareRecovered < 0 || c.ShareSummary+c.ShareRecovered > 1:
		return fmt.Errorf("share-summary, share-recovered: must be non-negative and sum to at most 1")
	}
	return c.Policy.Validate()
}

// loopback reports whether addr only accepts connections from this machine.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bindPolicyFlags declares one flag per compaction policy field, named after
// its config key (compaction_trigger_pct -> --compaction-trigger-pct), so
// the policy is set like everything else: flag, CTXD_ variable or file.
func bindPolicyFlags(fs *pflag.FlagSet, p *memory.Policy) {
	*p = memory.DefaultPolicy
	v := reflect.ValueOf(p).Elem()
	t := v.Type()
	for i := range t.NumField() {
		key := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		name := strings.ReplaceAll(key, "_", "-")
		usage := "compaction policy: " + key + " (sessions may override it with PUT /v1/sessions/{id})"
		switch f := v.Field(i).Addr().Interface().(type) {
		case *float64:
			fs.Float64Var(f, name, *f, usage)
		case *int:
			fs.IntVar(f, name, *f, usage)
		default:
			panic(fmt.Sprintf("policy field %s: unsupported type %T", key, f))
		}
	}
}
