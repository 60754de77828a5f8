package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/spf13/cobra"
)

// benchOptions is what `ctxd-bench bench` is told.
type benchOptions struct {
	Server      string        `json:"server,omitempty"` // empty: an in-process server
	ServerPID   int           `json:"server_pid,omitempty"`
	DataDir     string        `json:"data_dir,omitempty"`
	Store       string        `json:"-"` // in-process: serve's --store (may hold a password)
	Seed        uint64        `json:"seed"`
	Messages    int           `json:"messages"`
	Sessions    int           `json:"sessions"`
	Batch       int           `json:"batch"`
	Clients     int           `json:"clients"`
	Duration    time.Duration `json:"-"`
	ToolShare   float64       `json:"tool_share"`
	WordsMin    int           `json:"words_min"`
	WordsMax    int           `json:"words_max"`
	Mix         string        `json:"mix"`
	K           int           `json:"k"`
	Mode        string        `json:"mode"`
	MaxTokens   int           `json:"max_tokens"`
	Startup     bool          `json:"startup"`
	StartupExec bool          `json:"startup_exec"` // also time a fresh `ctxd serve` process
	Ctxd        string        `json:"-"`            // the binary of that process
	Compact     bool          `json:"compact"`
	SkipIngest  bool          `json:"skip_ingest"`
	Timeout     time.Duration `json:"-"`
	CPUProfile  string        `json:"cpuprofile,omitempty"`
	StartupProf string        `json:"startup_cpuprofile,omitempty"`
	PprofURL    string        `json:"pprof_url,omitempty"`
	Prefix      string        `json:"session_prefix"`

	DurationSec float64 `json:"duration_s"` // filled for the report
}

// The mixed-load operations.
const (
	benchOpSearchAll     = "search_all"     // hybrid search across every session
	benchOpSearchSession = "search_session" // hybrid search in one session
	benchOpContext       = "context"        // POST /context with a prompt from the corpus
	benchOpWrite         = "write"          // a small write: 1 or 2 chat turns
)

var benchOps = []string{benchOpSearchAll, benchOpSearchSession, benchOpContext, benchOpWrite}

// benchOpAll is the report's line for all of the mix's operations together.
const benchOpAll = "all"

const (
	benchIngestWindow = 1_000_000 // context_window of ingest sessions unless --compact
	benchMaxErrors    = 50        // a phase stops after this many errors
	benchReadyTimeout = 2 * time.Minute
)

func benchDefaults() benchOptions {
	return benchOptions{Seed: 1, Messages: 10_000, Sessions: 100, Batch: 100, Clients: 4, Duration: 20 * time.Second,
		ToolShare: 0.10, WordsMin: 10, WordsMax: 80, Mix: "search_all=30,search_session=30,context=30,write=10",
		K: 10, Mode: "hybrid", MaxTokens: 4000, StartupExec: true, Timeout: time.Hour, Prefix: "bench-"}
}

func newBenchCmd() *cobra.Command {
	o := benchDefaults()
	var asJSON bool
	var words string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Generate load against a ctxd on this machine and report throughput, latency, memory and disk",
		Long: "Store a deterministic synthetic corpus (chat turns and ~10% tool calls with long log-like outputs)\n" +
			"into --sessions sessions with --clients concurrent clients (ingest), then run a mixed load of hybrid\n" +
			"searches (across sessions and in one), context calls and small writes for --duration, and report\n" +
			"throughput, latency percentiles, errors, server memory (VmRSS/VmHWM) and data dir size.\n\n" +
			"Without --server it runs an in-process server on a temporary data dir (or --data-dir, kept).\n" +
			"With --server it loads that server, which must listen on loopback; --server-pid reads its memory\n" +
			"and --data-dir names its data dir for the size. Ingest sessions get a context_window of 1,000,000\n" +
			"so that ingest measures storage and indexing; --compact keeps the server's default window.\n" +
			"--startup stops the in-process server after ingest and times a restart on the same data dir until\n" +
			"/readyz answers 200 (in-process, and a fresh `ctxd serve` process).\n" +
			"Sessions named --session-prefix* are replaced before ingest. The exit code is non-zero on any error.",
		Example: "  ctxd-bench bench                                    # 10k messages, 100 sessions, 20 s of mixed load\n" +
			"  ctxd-bench bench --messages 100000 --startup --json\n" +
			"  ctxd-bench bench --tool-share 0 --words 40-80 --duration 0   # ingest of plain chat only\n" +
			"  ctxd-bench bench --server http://127.0.0.1:8080 --server-pid $(pgrep -n ctxd) --data-dir ./ctxd-data",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.WordsMin, o.WordsMax, err = benchParseRange(words); err != nil {
				return fmt.Errorf("--words: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := runBench(ctx, o, cmd.ErrOrStderr())
			if rep != nil {
				var werr error
				if asJSON {
					werr = rep.writeJSON(cmd.OutOrStdout())
				} else {
					werr = rep.writeText(cmd.OutOrStdout())
				}
				err = errors.Join(err, werr)
			}
			if err == nil && rep.Errors > 0 {
				err = fmt.Errorf("bench: %d requests failed", rep.Errors)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Server, "server", "", "base URL of a running ctxd on loopback (e.g. http://127.0.0.1:8080); empty: start one in-process")
	f.IntVar(&o.ServerPID, "server-pid", 0, "pid of the --server process, to read its VmRSS/VmHWM from /proc/<pid>/status")
	f.StringVar(&o.DataDir, "data-dir", "", "in-process: data dir to use and keep (default: a temporary one, removed); with --server: its data dir, for the size")
	f.StringVar(&o.Store, "store", "", "in-process: serve's --store (a postgres:// URL; empty: the data dir's embedded store); the data dir then holds the node's index")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the synthetic corpus and of the load")
	f.IntVar(&o.Messages, "messages", o.Messages, "messages to store (generated on the fly; 1,000,000 is fine)")
	f.IntVar(&o.Sessions, "sessions", o.Sessions, "sessions the messages are spread over (batch b goes to session b mod sessions)")
	f.IntVar(&o.Batch, "batch", o.Batch, "messages per POST (1..1000)")
	f.IntVar(&o.Clients, "clients", o.Clients, "concurrent clients, in ingest and in the mixed load")
	f.DurationVar(&o.Duration, "duration", o.Duration, "length of the mixed load (0: skip it)")
	f.Float64Var(&o.ToolShare, "tool-share", o.ToolShare, "share of messages that are tool outputs (0..0.45); 0: plain chat")
	f.StringVar(&words, "words", "10-80", "words of a chat turn, min-max (uniform)")
	f.StringVar(&o.Mix, "mix", o.Mix, "weights of the mixed load's operations: search_all, search_session, context, write")
	f.IntVar(&o.K, "k", o.K, "results per search")
	f.StringVar(&o.Mode, "mode", o.Mode, "search mode: hybrid, text or vector")
	f.IntVar(&o.MaxTokens, "max-tokens", o.MaxTokens, "max_tokens of context calls")
	f.BoolVar(&o.Startup, "startup", false, "after ingest, restart the in-process server on the same data dir and time it until /readyz answers 200")
	f.BoolVar(&o.StartupExec, "startup-exec", o.StartupExec, "with --startup, also time a fresh \"ctxd serve\" process on the data dir")
	f.StringVar(&o.Ctxd, "ctxd", defaultCtxd, "with --startup-exec, the ctxd binary to run")
	f.BoolVar(&o.Compact, "compact", false, "keep the server's default context window (ingest then includes compaction)")
	f.BoolVar(&o.SkipIngest, "skip-ingest", false, "do not ingest: the sessions already hold the corpus of these --seed/--messages/--sessions/--batch")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "stop the whole run after this long (raise it for 1M messages)")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the mixed load here (in-process: this process, server and clients; with --server: fetched from --pprof-url)")
	f.StringVar(&o.StartupProf, "startup-cpuprofile", "", "with --startup: write a CPU profile of the in-process restart here")
	f.StringVar(&o.PprofURL, "pprof-url", "", "with --server and --cpuprofile: the server's --pprof-addr as a URL (e.g. http://127.0.0.1:6060)")
	f.StringVar(&o.Prefix, "session-prefix", o.Prefix, "prefix of the bench's session ids")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func benchParseRange(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || lo < 1 || hi < lo || hi > 5000 {
		return 0, 0, fmt.Errorf("%q is not min-max with 1 <= min <= max <= 5000", s)
	}
	return lo, hi, nil
}

// benchParseMix reads "op=weight,...": every op named must be known.
func benchParseMix(s string) (map[string]int, error) {
	w := map[string]int{}
	total := 0
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(strings.TrimSpace(val))
		name = strings.TrimSpace(name)
		if !ok || err != nil || n < 0 || !slices.Contains(benchOps, name) {
			return nil, fmt.Errorf("--mix: %q is not op=weight with op one of %s", part, strings.Join(benchOps, ", "))
		}
		w[name] = n
		total += n
	}
	if total == 0 {
		return nil, fmt.Errorf("--mix: %q has no operation with a positive weight", s)
	}
	return w, nil
}

func (o *benchOptions) validate() error {
	switch {
	case o.Messages < 1:
		return errors.New("--messages: must be at least 1")
	case o.Sessions < 1:
		return errors.New("--sessions: must be at least 1")
	case o.Batch < 1 || o.Batch > 1000:
		return errors.New("--batch: must be in 1..1000 (the API's limit per call)")
	case o.Clients < 1 || o.Clients > 256:
		return errors.New("--clients: must be in 1..256")
	case o.Duration < 0:
		return errors.New("--duration: must not be negative")
	case o.ToolShare < 0 || o.ToolShare > benchMaxToolShare:
		return fmt.Errorf("--tool-share: must be in 0..%v", benchMaxToolShare)
	case o.WordsMin < 1 || o.WordsMax < o.WordsMin:
		return errors.New("--words: need 1 <= min <= max")
	case o.K < 1 || o.K > 100:
		return errors.New("--k: must be in 1..100")
	case o.Mode != "hybrid" && o.Mode != "text" && o.Mode != "vector":
		return fmt.Errorf("--mode: %q is not hybrid, text or vector", o.Mode)
	case o.MaxTokens < 1:
		return errors.New("--max-tokens: must be at least 1")
	case o.Startup && o.Server != "":
		return errors.New("--startup: needs the in-process server (it restarts it); drop --server")
	case o.ServerPID != 0 && o.Server == "":
		return errors.New("--server-pid: only with --server (the in-process server is this process)")
	case o.PprofURL != "" && o.Server == "":
		return errors.New("--pprof-url: only with --server (in-process, --cpuprofile profiles this process)")
	case o.SkipIngest && o.Server == "" && o.DataDir == "":
		return errors.New("--skip-ingest: needs --data-dir (a data dir that holds the corpus) or --server")
	case o.StartupProf != "" && !o.Startup:
		return errors.New("--startup-cpuprofile: only with --startup")
	case o.Timeout <= 0:
		return errors.New("--timeout: must be positive")
	case o.Prefix == "" || len(o.Prefix) > 100 || o.Prefix[0] == '.' || strings.Trim(o.Prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") != "":
		return fmt.Errorf("--session-prefix: %q must be 1..100 characters of [A-Za-z0-9._:-], not starting with '.'", o.Prefix)
	}
	_, err := benchParseMix(o.Mix)
	return err
}

// benchLat summarises the latencies of one operation.
type benchLat struct {
	Count  int     `json:"count"`
	Errors int     `json:"errors"`
	PerSec float64 `json:"per_sec"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
	Mean   float64 `json:"mean_ms"`
}

func benchLatStats(lat []time.Duration, errs int, elapsed time.Duration) benchLat {
	s := slices.Clone(lat)
	slices.Sort(s)
	l := benchLat{Count: len(s), Errors: errs}
	if elapsed > 0 {
		l.PerSec = math.Round(float64(len(s))/elapsed.Seconds()*10) / 10
	}
	if len(s) > 0 {
		var sum time.Duration
		for _, d := range s {
			sum += d
		}
		l.P50, l.P95, l.P99 = benchMS(benchPercentile(s, .50)), benchMS(benchPercentile(s, .95)), benchMS(benchPercentile(s, .99))
		l.Max, l.Mean = benchMS(s[len(s)-1]), benchMS(sum/time.Duration(len(s)))
	}
	return l
}

type benchCorpusStats struct {
	Messages     int     `json:"messages"`
	Chat         int     `json:"chat_messages"`
	ToolCalls    int     `json:"tool_calls"`
	ToolOutputs  int     `json:"tool_outputs"`
	WordsPerChat float64 `json:"words_per_chat_message"`
	ToolOutputKB float64 `json:"tool_output_kb_mean"`
	ContentMB    float64 `json:"content_mb"`
	chatWords    int
	toolBytes    int64
	bytes        int64
}

func (s *benchCorpusStats) add(msgs []api.MessageIn) {
	for _, m := range msgs {
		s.Messages++
		s.bytes += int64(len(m.Content))
		switch {
		case m.Role == "tool":
			s.ToolOutputs++
			s.toolBytes += int64(len(m.Content))
		case len(m.ToolCalls) > 0:
			s.ToolCalls++
		default:
			s.Chat++
			s.chatWords += len(strings.Fields(m.Content))
		}
	}
}

func (s *benchCorpusStats) merge(t *benchCorpusStats) {
	s.Messages += t.Messages
	s.Chat += t.Chat
	s.ToolCalls += t.ToolCalls
	s.ToolOutputs += t.ToolOutputs
	s.chatWords += t.chatWords
	s.toolBytes += t.toolBytes
	s.bytes += t.bytes
}

func (s *benchCorpusStats) finish() {
	if s.Chat > 0 {
		s.WordsPerChat = math.Round(float64(s.chatWords)/float64(s.Chat)*10) / 10
	}
	if s.ToolOutputs > 0 {
		s.ToolOutputKB = math.Round(float64(s.toolBytes)/float64(s.ToolOutputs)/1024*10) / 10
	}
	s.ContentMB = benchMB(s.bytes)
}

type benchIngest struct {
	Messages       int      `json:"messages"`
	Batches        int      `json:"batches"`
	Seconds        float64  `json:"seconds"`
	MessagesPerSec float64  `json:"messages_per_sec"`
	MBPerSec       float64  `json:"request_mb_per_sec"`
	Batch          benchLat `json:"batch_latency"`
	Compactions    int      `json:"compactions"`
	Errors         int      `json:"errors"`
	ClientSeconds  float64  `json:"client_gen_seconds"` // generating and encoding batches, all clients
	CPUSeconds     float64  `json:"cpu_s,omitempty"`    // CPU the server used (in-process: with the load generator)
	CPUMsPerBatch  float64  `json:"cpu_ms_per_batch,omitempty"`
	Window         string   `json:"context_window"`
}

type benchStartup struct {
	ShutdownSeconds  float64 `json:"shutdown_s"`
	InProcessSeconds float64 `json:"in_process_restart_s"`
	FreshSeconds     float64 `json:"fresh_process_s,omitempty"`
	FreshRSSMB       float64 `json:"fresh_process_rss_mb,omitempty"`
	FreshAnonMB      float64 `json:"fresh_process_rss_anon_mb,omitempty"`
	FreshFileMB      float64 `json:"fresh_process_rss_file_mb,omitempty"`
	FreshCPUSeconds  float64 `json:"fresh_process_cpu_s,omitempty"` // CPU it used until ready
	FreshNote        string  `json:"fresh_process_note,omitempty"`
}

type benchMixed struct {
	Seconds       float64             `json:"seconds"`
	Clients       int                 `json:"clients"`
	Ops           map[string]benchLat `json:"ops"`
	TotalPerSec   float64             `json:"total_per_sec"`
	EmptySearches int                 `json:"empty_searches"`
	CPUSeconds    float64             `json:"cpu_s,omitempty"`
	CPUMsPerOp    float64             `json:"cpu_ms_per_op,omitempty"`
	Queries       int                 `json:"query_pool"`
	Prompts       int                 `json:"prompt_pool"`
}

type benchMemory struct {
	Source         string  `json:"source"`
	RSSAfterIngest float64 `json:"rss_after_ingest_mb,omitempty"`
	RSSEnd         float64 `json:"rss_end_mb"`
	AnonEnd        float64 `json:"rss_anon_end_mb"`
	FileEnd        float64 `json:"rss_file_end_mb"`
	HWM            float64 `json:"hwm_mb"`
	GoHeapLive     float64 `json:"go_heap_live_mb,omitempty"`
	GoSys          float64 `json:"go_sys_mb,omitempty"`
	Note           string  `json:"note,omitempty"`
}

type benchDisk struct {
	Dir   string             `json:"dir"`
	Total float64            `json:"total_mb"`
	Parts map[string]float64 `json:"parts_mb"`
}

// benchReport is what one run measured.
type benchReport struct {
	Server       string            `json:"server"`
	Options      benchOptions      `json:"options"`
	LoadAvg      map[string]string `json:"load_avg"`
	Corpus       *benchCorpusStats `json:"corpus,omitempty"`
	Ingest       *benchIngest      `json:"ingest,omitempty"`
	Startup      *benchStartup     `json:"startup,omitempty"`
	Mixed        *benchMixed       `json:"mixed,omitempty"`
	Memory       *benchMemory      `json:"memory,omitempty"`
	Disk         *benchDisk        `json:"data_dir_size,omitempty"`
	Errors       int               `json:"errors"`
	ErrorSamples []string          `json:"error_samples,omitempty"`
	Profile      string            `json:"cpuprofile,omitempty"`

	mu sync.Mutex
}

// fail counts an error and keeps the first few.
func (r *benchReport) fail(op string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Errors++
	if len(r.ErrorSamples) < 10 {
		r.ErrorSamples = append(r.ErrorSamples, op+": "+err.Error())
	}
}

func (r *benchReport) errorCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Errors
}

// benchRun is one run in progress.
type benchRun struct {
	o      benchOptions
	c      *benchCorpus
	rep    *benchReport
	cl     *client.Client
	httpc  *http.Client // cl's, whose idle connections a restart closes
	logw   io.Writer
	logMu  sync.Mutex   // the ingest progress goroutine logs too
	srv    *server.Main // the in-process server, if any
	srvDir string
}

// runBench runs the phases. The report is returned even with an error, with
// what was measured up to it.
func runBench(ctx context.Context, o benchOptions, logw io.Writer) (_ *benchReport, err error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if logw == nil {
		logw = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	o.DurationSec = o.Duration.Seconds()
	r := &benchRun{o: o, logw: logw, rep: &benchReport{Options: o, LoadAvg: map[string]string{"start": benchLoadAvg()}}}
	r.c = newBenchCorpus(benchCorpus{Seed: o.Seed, Messages: o.Messages, Sessions: o.Sessions, Batch: o.Batch,
		ToolShare: o.ToolShare, WordsMin: o.WordsMin, WordsMax: o.WordsMax, Prefix: o.Prefix})
	r.httpc = benchHTTPClient(o.Clients)
	defer r.httpc.CloseIdleConnections()

	if o.Server != "" {
		base, err := benchLoopbackURL(ctx, "server", o.Server)
		if err != nil {
			return nil, err
		}
		if o.PprofURL != "" {
			if o.PprofURL, err = benchLoopbackURL(ctx, "pprof-url", o.PprofURL); err != nil {
				return nil, err
			}
		}
		if r.cl, err = benchAPIClient(base, r.httpc); err != nil {
			return nil, err
		}
		r.rep.Server = base
	} else {
		dir, keep := o.DataDir, o.DataDir != ""
		if !keep {
			if dir, err = os.MkdirTemp("", "ctxd-bench-"); err != nil {
				return nil, fmt.Errorf("bench: temporary data dir: %w", err)
			}
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("bench: data dir: %w", err)
		}
		r.srvDir = dir
		defer func() {
			if r.srv != nil {
				if cerr := r.srv.Close(); cerr != nil {
					err = errors.Join(err, fmt.Errorf("bench: stop server: %w", cerr))
				}
			}
			if !keep {
				if rerr := os.RemoveAll(dir); rerr != nil {
					err = errors.Join(err, fmt.Errorf("bench: remove %s: %w", dir, rerr))
				}
			}
		}()
		if r.srv, err = benchStartServer(ctx, dir, o.Store); err != nil {
			return nil, err
		}
		if r.cl, err = benchAPIClient("http://"+r.srv.Addr.String(), r.httpc); err != nil {
			return nil, err
		}
		r.rep.Server = "in-process (default settings) on " + dir
		if !keep {
			r.rep.Server += " (temporary)"
		}
	}
	if err := waitReady(ctx, r.cl, benchReadyTimeout, nil); err != nil {
		return r.rep, err
	}

	if !o.SkipIngest {
		if err := r.ingest(ctx); err != nil {
			return r.rep, err
		}
		r.rep.LoadAvg["after_ingest"] = benchLoadAvg()
	}
	var memAfterIngest benchProcMem
	if pid := r.pid(); pid != "" {
		memAfterIngest, _ = benchReadProcMem(pid)
	}
	if o.Startup {
		if err := r.startup(ctx); err != nil {
			return r.rep, err
		}
	}
	if o.Duration > 0 {
		if err := r.mixed(ctx); err != nil {
			return r.rep, err
		}
	}
	r.rep.LoadAvg["end"] = benchLoadAvg()
	if err := r.measureMemory(memAfterIngest); err != nil {
		return r.rep, err
	}
	dir := r.srvDir
	if dir == "" {
		dir = o.DataDir
	}
	if dir != "" {
		total, parts, derr := benchDirSize(dir)
		if derr != nil {
			return r.rep, fmt.Errorf("bench: data dir size: %w", derr)
		}
		d := &benchDisk{Dir: dir, Total: benchMB(total), Parts: map[string]float64{}}
		for k, v := range parts {
			d.Parts[k] = benchMB(v)
		}
		r.rep.Disk = d
	}
	return r.rep, ctx.Err()
}

// pid is the process whose memory is the server's, or "".
func (r *benchRun) pid() string {
	switch {
	case r.srv != nil:
		return "self"
	case r.o.ServerPID > 0:
		return strconv.Itoa(r.o.ServerPID)
	}
	return ""
}

// cpu is the CPU time the server's process has used; 0 when unknown.
func (r *benchRun) cpu() (time.Duration, error) {
	if pid := r.pid(); pid != "" {
		return benchCPU(pid)
	}
	return 0, nil
}

func (r *benchRun) measureMemory(afterIngest benchProcMem) error {
	pid := r.pid()
	if pid == "" {
		return nil
	}
	m, err := benchReadProcMem(pid)
	if err != nil {
		return fmt.Errorf("bench: server memory: %w", err)
	}
	mem := &benchMemory{Source: "/proc/" + pid + "/status", RSSAfterIngest: benchMB(afterIngest.RSS),
		RSSEnd: benchMB(m.RSS), AnonEnd: benchMB(m.Anon), FileEnd: benchMB(m.File), HWM: benchMB(m.HWM)}
	if pid == "self" {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mem.GoHeapLive, mem.GoSys = benchMB(int64(ms.HeapAlloc)), benchMB(int64(ms.Sys))
		mem.Note = "in-process: the figures include the load generator (small: it generates on the fly)"
		if r.o.Startup {
			mem.Note += "; VmHWM and Go's retained memory include the server from before the restart"
		}
	}
	r.rep.Memory = mem
	return nil
}

// benchStartServer runs a ctxd with the default settings on dir, on loopback.
func benchStartServer(ctx context.Context, dir, store string) (*server.Main, error) {
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.LogLevel, cfg.Store = dir, "warn", store
	m, err := server.RunLocal(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench server: start: %w", err)
	}
	return m, nil
}

func (r *benchRun) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.logw, "bench: "+format+"\n", args...)
}

// ingest replaces the bench sessions and stores the corpus into them.
func (r *benchRun) ingest(ctx context.Context) error {
	o, c := r.o, r.c
	put := &api.SessionIn{}
	window := "server default"
	if !o.Compact {
		put.ContextWindow = new(benchIngestWindow)
		window = strconv.Itoa(benchIngestWindow)
	}
	for s := range o.Sessions {
		if err := errNotFoundOK(r.cl.DeleteSession(ctx, c.sessionID(s))); err != nil {
			return fmt.Errorf("bench: clear session: %w", err)
		}
		if _, err := r.cl.PutSession(ctx, c.sessionID(s), put); err != nil {
			return fmt.Errorf("bench: create session: %w", err)
		}
	}
	nb := c.batches()
	r.logf("ingest: %d messages in %d batches of %d into %d sessions, %d clients", o.Messages, nb, o.Batch, o.Sessions, o.Clients)
	type result struct {
		lat         []time.Duration
		errs        int
		compactions int
		stats       benchCorpusStats
		gen         time.Duration
		bytes       int64
	}
	results := make([]result, o.Clients)
	var next, done atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	cpu0, cpuErr := r.cpu()
	start := time.Now()
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	finished := make(chan struct{})
	go func() {
		for {
			select {
			case <-finished:
				return
			case <-progress.C:
				n := done.Load()
				r.logf("ingest: %d/%d messages, %.0f msg/s, load %s", n, o.Messages, float64(n)/time.Since(start).Seconds(), benchLoadAvg())
			}
		}
	}()
	for w := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := &results[w]
			for !stop.Load() && ctx.Err() == nil {
				b := int(next.Add(1) - 1)
				if b >= nb {
					return
				}
				g0 := time.Now()
				msgs := c.batch(b)
				// Encoded here only to count the bytes sent: the client
				// encodes the body again, inside the timed call.
				body, err := json.Marshal(api.AppendIn{Messages: msgs})
				res.gen += time.Since(g0)
				if err != nil {
					r.rep.fail("ingest", err)
					res.errs++
					continue
				}
				res.bytes += int64(len(body))
				t0 := time.Now()
				ans, err := r.cl.Append(ctx, c.sessionOf(b), msgs)
				took := time.Since(t0)
				if err == nil && len(ans.IDs) != len(msgs) {
					err = fmt.Errorf("batch %d: sent %d messages, got %d ids", b, len(msgs), len(ans.IDs))
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					r.rep.fail("ingest", err)
					res.errs++
					if r.rep.errorCount() >= benchMaxErrors {
						stop.Store(true)
					}
					continue
				}
				res.lat = append(res.lat, took)
				res.stats.add(msgs) // the corpus stored, not the corpus sent
				if ans.Compaction != nil {
					res.compactions++
				}
				done.Add(int64(len(msgs)))
			}
		}()
	}
	wg.Wait()
	close(finished)
	elapsed := time.Since(start)
	cpu1, cpuErr1 := r.cpu()
	in := &benchIngest{Batches: nb, Seconds: math.Round(elapsed.Seconds()*1000) / 1000, Window: window}
	stats := &benchCorpusStats{}
	var lat []time.Duration
	var gen time.Duration
	var bytes int64
	for i := range results {
		lat = append(lat, results[i].lat...)
		in.Errors += results[i].errs
		in.Compactions += results[i].compactions
		stats.merge(&results[i].stats)
		gen += results[i].gen
		bytes += results[i].bytes
	}
	stats.finish()
	in.Messages = int(done.Load())
	in.MessagesPerSec = math.Round(float64(in.Messages)/elapsed.Seconds()*10) / 10
	in.MBPerSec = math.Round(float64(bytes)/(1<<20)/elapsed.Seconds()*100) / 100
	in.Batch = benchLatStats(lat, in.Errors, elapsed)
	in.ClientSeconds = math.Round(gen.Seconds()*100) / 100
	if cpuErr == nil && cpuErr1 == nil && cpu1 > 0 {
		in.CPUSeconds = math.Round((cpu1-cpu0).Seconds()*100) / 100
		if in.Batch.Count > 0 {
			in.CPUMsPerBatch = benchMS((cpu1 - cpu0) / time.Duration(in.Batch.Count))
		}
	}
	r.rep.Ingest, r.rep.Corpus = in, stats
	r.logf("ingest: %d messages in %.1fs = %.0f msg/s, %d errors", in.Messages, elapsed.Seconds(), in.MessagesPerSec, in.Errors)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench: ingest stopped: %w", err)
	}
	if stop.Load() {
		return fmt.Errorf("bench: ingest stopped after %d errors", r.rep.errorCount())
	}
	return nil
}

// startup stops the in-process server, times a fresh process on its data
// dir (when asked and possible), then times the in-process restart.
func (r *benchRun) startup(ctx context.Context) error {
	st := &benchStartup{}
	r.rep.Startup = st
	t0 := time.Now()
	err := r.srv.Close()
	r.srv = nil
	st.ShutdownSeconds = math.Round(time.Since(t0).Seconds()*1000) / 1000
	if err != nil {
		return fmt.Errorf("bench: stop server for restart: %w", err)
	}
	r.httpc.CloseIdleConnections()
	if r.o.StartupExec {
		switch {
		case r.o.Ctxd == "":
			st.FreshNote = "skipped: no --ctxd binary"
		default:
			took, mem, cpu, ferr := benchFreshStart(ctx, r.o.Ctxd, r.srvDir)
			if ferr != nil {
				return ferr
			}
			st.FreshSeconds = math.Round(took.Seconds()*1000) / 1000
			st.FreshRSSMB, st.FreshAnonMB, st.FreshFileMB = benchMB(mem.RSS), benchMB(mem.Anon), benchMB(mem.File)
			st.FreshCPUSeconds = math.Round(cpu.Seconds()*100) / 100
			st.FreshNote = "`ctxd serve` child process: exec to /readyz 200; RSS when ready"
			r.logf("startup: fresh process ready in %.3fs, RSS %.0f MB", took.Seconds(), benchMB(mem.RSS))
		}
	}
	var prof *os.File
	if r.o.StartupProf != "" {
		if prof, err = os.Create(r.o.StartupProf); err != nil {
			return fmt.Errorf("bench: --startup-cpuprofile: %w", err)
		}
		defer prof.Close()
		if err := pprof.StartCPUProfile(prof); err != nil {
			return fmt.Errorf("bench: --startup-cpuprofile: %w", err)
		}
	}
	t0 = time.Now()
	r.srv, err = benchStartServer(ctx, r.srvDir, r.o.Store)
	if err == nil {
		if r.cl, err = benchAPIClient("http://"+r.srv.Addr.String(), r.httpc); err == nil {
			err = waitReady(ctx, r.cl, benchReadyTimeout, nil)
		}
	}
	took := time.Since(t0)
	if prof != nil {
		pprof.StopCPUProfile()
		if cerr := prof.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("bench: --startup-cpuprofile: %w", cerr)
		}
	}
	if err != nil {
		return err
	}
	st.InProcessSeconds = math.Round(took.Seconds()*1000) / 1000
	r.logf("startup: in-process restart ready in %.3fs", took.Seconds())
	return nil
}

// benchFreshStart runs `exe serve` on dir and times it until /readyz
// answers 200; it then stops it with SIGTERM.
func benchFreshStart(ctx context.Context, exe, dir string) (time.Duration, benchProcMem, time.Duration, error) {
	var stderr bytes.Buffer
	t0 := time.Now()
	child, err := startChild(exe, dir, &stderr)
	if err != nil {
		return 0, benchProcMem{}, 0, fmt.Errorf("bench: fresh start: %w", err)
	}
	hc := benchHTTPClient(1)
	defer hc.CloseIdleConnections()
	cl, err := benchAPIClient(child.URL, hc)
	if err == nil {
		err = waitReady(ctx, cl, benchReadyTimeout, child.exited)
	}
	if err != nil {
		return 0, benchProcMem{}, 0, errors.Join(fmt.Errorf("bench: fresh `ctxd serve`: %w: %.2000s", err, stderr.String()), child.stop())
	}
	took := time.Since(t0)
	mem, merr := benchReadProcMem(strconv.Itoa(child.Pid))
	cpu, cerr := benchCPU(strconv.Itoa(child.Pid))
	if serr := child.stop(); serr != nil {
		return took, mem, cpu, fmt.Errorf("bench: fresh `ctxd serve`: %v: %.2000s", serr, stderr.String())
	}
	if err := errors.Join(merr, cerr); err != nil {
		return took, mem, cpu, fmt.Errorf("bench: fresh `ctxd serve` memory or CPU: %w", err)
	}
	return took, mem, cpu, nil
}

// benchQuery is a search of the mixed load; session empty: across sessions.
type benchQuery struct{ session, text string }

// pools draws search queries (3 to 8 words of a stored chat turn) and context
// prompts (whole stored user turns) from the corpus.
func (r *benchRun) pools() (queries, prompts []benchQuery) {
	c := r.c
	nb := c.batches()
	rng := rand.New(rand.NewPCG(r.o.Seed, 0xbe4c))
	picks := min(nb, 256)
	for range picks {
		b := rng.IntN(nb)
		s := c.sessionOf(b)
		msgs := c.batch(b)
		for range 8 {
			m := msgs[rng.IntN(len(msgs))]
			if m.Role == "tool" || m.Content == "" {
				continue
			}
			words := strings.Fields(m.Content)
			n := min(len(words), 3+rng.IntN(6))
			at := rng.IntN(len(words) - n + 1)
			q := make([]string, 0, n)
			for _, w := range words[at : at+n] {
				if w = strings.Trim(w, ".,?"); w != "" {
					q = append(q, w)
				}
			}
			if len(q) > 0 {
				queries = append(queries, benchQuery{s, strings.Join(q, " ")})
			}
		}
		for _, m := range msgs {
			if m.Role == "user" && len(prompts) < 4*(len(queries)/8+1) {
				prompts = append(prompts, benchQuery{s, m.Content})
			}
		}
	}
	return queries, prompts
}

// mixed runs the mixed load for the duration.
func (r *benchRun) mixed(ctx context.Context) error {
	o, c := r.o, r.c
	weights, _ := benchParseMix(o.Mix)
	var cum []int
	var ops []string
	total := 0
	for _, op := range benchOps {
		if w := weights[op]; w > 0 {
			total += w
			cum = append(cum, total)
			ops = append(ops, op)
		}
	}
	queries, prompts := r.pools()
	if len(queries) == 0 || len(prompts) == 0 {
		return errors.New("bench: the corpus gave no search queries or prompts (too few messages?)")
	}
	var stopProfile func() error
	if o.CPUProfile != "" {
		var err error
		if stopProfile, err = r.startProfile(ctx); err != nil {
			return err
		}
	}
	r.logf("mixed: %s for %s with %d clients (%d queries, %d prompts)", o.Mix, o.Duration, o.Clients, len(queries), len(prompts))
	type result struct {
		lat   map[string][]time.Duration
		errs  map[string]int
		empty int
	}
	results := make([]result, o.Clients)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(o.Duration)
	var failed atomic.Bool
	cpu0, cpuErr := r.cpu()
	for w := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := &results[w]
			res.lat, res.errs = map[string][]time.Duration{}, map[string]int{}
			rng := rand.New(rand.NewPCG(o.Seed, 0x70ad+uint64(w)))
			g := c.gen(2, uint64(w))
			for time.Now().Before(deadline) && ctx.Err() == nil && !failed.Load() {
				x := rng.IntN(total)
				i := 0
				for cum[i] <= x {
					i++
				}
				op := ops[i]
				var check func() error
				t0 := time.Now()
				var err error
				switch op {
				case benchOpSearchAll, benchOpSearchSession:
					q := queries[rng.IntN(len(queries))]
					in := api.SearchIn{Query: q.text, K: o.K, Mode: o.Mode}
					if op == benchOpSearchSession {
						in.SessionID = q.session
					}
					var hits []api.SearchResult
					hits, err = r.cl.Search(ctx, in)
					check = func() error {
						if len(hits) == 0 {
							res.empty++
						}
						if len(hits) > o.K {
							return fmt.Errorf("asked k=%d, got %d results", o.K, len(hits))
						}
						for _, hit := range hits {
							if op == benchOpSearchSession && hit.SessionID != q.session {
								return fmt.Errorf("search in session %s returned a hit of session %s", q.session, hit.SessionID)
							}
						}
						return nil
					}
				case benchOpContext:
					p := prompts[rng.IntN(len(prompts))]
					var win *api.Context
					win, err = r.cl.Context(ctx, p.session, api.ContextIn{Prompt: p.text, MaxTokens: &o.MaxTokens})
					check = func() error {
						if win.Tokens > o.MaxTokens {
							return fmt.Errorf("context of %d tokens exceeds max_tokens %d", win.Tokens, o.MaxTokens)
						}
						if len(win.Messages) == 0 {
							return errors.New("context returned no messages")
						}
						return nil
					}
				case benchOpWrite:
					msgs := []api.MessageIn{{Role: "user", Content: g.chat()}}
					if rng.IntN(2) == 0 {
						msgs = append(msgs, api.MessageIn{Role: "assistant", Content: g.chat()})
					}
					t0 = time.Now() // the messages are not the server's time
					var ans *api.AppendOut
					ans, err = r.cl.Append(ctx, c.sessionID(rng.IntN(o.Sessions)), msgs)
					check = func() error {
						if len(ans.IDs) != len(msgs) {
							return fmt.Errorf("wrote %d messages, got %d ids", len(msgs), len(ans.IDs))
						}
						return nil
					}
				}
				r.record(res.lat, res.errs, op, t0, err, check, &failed)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, cpuErr1 := r.cpu()
	var perr error
	if stopProfile != nil {
		perr = stopProfile()
	}
	m := &benchMixed{Seconds: math.Round(elapsed.Seconds()*1000) / 1000, Clients: o.Clients, Ops: map[string]benchLat{},
		Queries: len(queries), Prompts: len(prompts)}
	count := 0
	var allLat []time.Duration
	allErrs := 0
	for _, op := range ops {
		var lat []time.Duration
		errs := 0
		for i := range results {
			lat = append(lat, results[i].lat[op]...)
			errs += results[i].errs[op]
		}
		m.Ops[op] = benchLatStats(lat, errs, elapsed)
		count += len(lat)
		allLat, allErrs = append(allLat, lat...), allErrs+errs
	}
	// every operation together: the figure a client of the mix sees
	m.Ops[benchOpAll] = benchLatStats(allLat, allErrs, elapsed)
	for i := range results {
		m.EmptySearches += results[i].empty
	}
	m.TotalPerSec = math.Round(float64(count)/elapsed.Seconds()*10) / 10
	if cpuErr == nil && cpuErr1 == nil && cpu1 > 0 {
		m.CPUSeconds = math.Round((cpu1-cpu0).Seconds()*100) / 100
		if count > 0 {
			m.CPUMsPerOp = benchMS((cpu1 - cpu0) / time.Duration(count))
		}
	}
	r.rep.Mixed = m
	r.logf("mixed: %d operations in %.1fs, load %s", count, elapsed.Seconds(), benchLoadAvg())
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench: mixed load stopped: %w", err)
	}
	if failed.Load() {
		return errors.Join(perr, fmt.Errorf("bench: mixed load stopped after %d errors", r.rep.errorCount()))
	}
	return perr
}

// record files one operation's latency or error.
func (r *benchRun) record(lat map[string][]time.Duration, errs map[string]int, op string, t0 time.Time,
	err error, check func() error, failed *atomic.Bool) {
	took := time.Since(t0)
	if err == nil {
		err = check()
	}
	if err != nil {
		errs[op]++
		r.rep.fail(op, err)
		if r.rep.errorCount() >= benchMaxErrors {
			failed.Store(true)
		}
		return
	}
	lat[op] = append(lat[op], took)
}

// startProfile starts a CPU profile of the mixed load: of this process when
// the server is in-process, else fetched from the server's pprof endpoint.
func (r *benchRun) startProfile(ctx context.Context) (func() error, error) {
	f, err := os.Create(r.o.CPUProfile)
	if err != nil {
		return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
	}
	r.rep.Profile = r.o.CPUProfile
	if r.srv != nil {
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		return func() error {
			pprof.StopCPUProfile()
			return f.Close()
		}, nil
	}
	if r.o.PprofURL == "" {
		f.Close()
		return nil, errors.New("bench: --cpuprofile with --server needs --pprof-url (the server's --pprof-addr)")
	}
	secs := max(1, int(math.Round(r.o.Duration.Seconds())))
	// pprof is not the ctxd API: a plain GET through the loopback-only client.
	hc := benchHTTPClient(1)
	done := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, "GET", r.o.PprofURL+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
		if err != nil {
			done <- err
			return
		}
		res, err := hc.Do(req)
		if err != nil {
			done <- err
			return
		}
		defer res.Body.Close()
		if res.StatusCode != 200 {
			done <- fmt.Errorf("pprof: %s", res.Status)
			return
		}
		_, err = io.Copy(f, res.Body)
		done <- err
	}()
	return func() error {
		err := <-done
		return errors.Join(err, f.Close())
	}, nil
}
