package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// figuresOptions is what `ctxd-bench figures` is told.
type figuresOptions struct {
	Readme   string
	Print    bool
	FromJSON string
	SaveJSON string
	Quick    bool

	// Bench sizes: the data set the latency, load, start-up and memory
	// figures are measured on.
	Messages        int
	Sessions        int
	Clients         int           // of the mixed load
	Duration        time.Duration // of the mixed load
	LatencyDuration time.Duration // of the one-client latency run
	IngestMessages  int           // of the ingest run the ingest goal is stated for

	// The long-conversation benchmark and its BM25 floor.
	Turns     string
	Questions string
	Floor     string
	EvalTurns int // at most this many turns of the first conversation; 0: all

	// The recorded coding-agent runs (ctxd-bench eval --agent).
	AgentRuns  string
	AgentLimit int // the first this many runs; 0: all

	// Ctxd is the ctxd binary the agent replay and the bench's fresh start
	// run `serve` of, as child processes.
	Ctxd string

	Command string // the command line, for the header
}

// figuresQuick are the sizes of a smoke run; flags given explicitly win.
var figuresQuick = map[string]string{
	"messages": "1000", "sessions": "10", "clients": "8", "duration": "2s",
	"latency-duration": "2s", "ingest-messages": "400", "eval-turns": "60", "agent-limit": "1",
}

func newFiguresCmd() *cobra.Command {
	var o figuresOptions
	cmd := &cobra.Command{
		Use:   "figures",
		Short: "Measure the headline figures on this machine and write them as a table into README.md",
		Long: "Run the LoCoMo eval (recall@k beside the BM25 floor, evidence in window beside sliding-window and\n" +
			"BM25 packing), the load bench (ingest, one-client search and context latency at --messages /\n" +
			"--sessions, --clients for --duration of mixed load, start-up, memory) and the replay of recorded\n" +
			"coding-agent runs (ctxd-bench eval --agent on --agent-runs) against in-process servers on\n" +
			"temporary data dirs, then render a Markdown table of the figures against their goals, with the date,\n" +
			"commit, machine and this command line, between the markers\n" +
			"<!-- figures:start --> and <!-- figures:end --> of --readme (or on stdout with --print).\n" +
			"--save-json keeps the eval and bench JSON reports; --from-json renders from such a directory\n" +
			"without measuring anything. --quick uses tiny sizes: a smoke run, not figures to publish.",
		Example: "  ctxd-bench figures                                # the full sizes (make figures)\n" +
			"  ctxd-bench figures --quick --print\n" +
			"  ctxd-bench figures --save-json /tmp/fig && ctxd-bench figures --from-json /tmp/fig --print",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd.Flags()); err != nil {
				return err
			}
			o.Command = figuresCommandLine(cmd)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runFigures(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Readme, "readme", "README.md", "the file whose "+figuresStart+" ... "+figuresEnd+" block is replaced")
	f.BoolVar(&o.Print, "print", false, "write the block to stdout instead of --readme")
	f.StringVar(&o.Ctxd, "ctxd", defaultCtxd, "the ctxd binary whose `serve` the agent replay and the bench's fresh start run as child processes")
	f.StringVar(&o.FromJSON, "from-json", "", "render from the JSON reports a --save-json run left in this directory; measure nothing")
	f.StringVar(&o.SaveJSON, "save-json", "", "keep the JSON reports (eval, bench runs, floor, header) in this directory")
	f.BoolVar(&o.Quick, "quick", false, "tiny sizes for a smoke run (explicit size flags still win); never publish its numbers")
	f.IntVar(&o.Messages, "messages", 100_000, "messages of the bench data set")
	f.IntVar(&o.Sessions, "sessions", 100, "sessions the bench messages are spread over")
	f.IntVar(&o.Clients, "clients", 50, "concurrent clients of the mixed load")
	f.DurationVar(&o.Duration, "duration", 60*time.Second, "length of the mixed load")
	f.DurationVar(&o.LatencyDuration, "latency-duration", 30*time.Second, "length of the one-client search and context latency run")
	f.IntVar(&o.IngestMessages, "ingest-messages", 20_000, "messages of the ingest run measured against the ingest goal (chat turns of 40-80 words)")
	f.StringVar(&o.Turns, "turns", "", "the eval's turns.jsonl (LoCoMo: see the README; make figures passes $BENCH_DIR/turns.jsonl)")
	f.StringVar(&o.Questions, "questions", "", "the eval's questions.jsonl")
	f.StringVar(&o.Floor, "floor", "", "Markdown file whose \"floor\" section holds the BM25 floor table (category, R@5, R@10, R@20)")
	f.IntVar(&o.EvalTurns, "eval-turns", 0, "evaluate only the first conversation, cut to this many turns (0: everything)")
	f.StringVar(&o.AgentRuns, "agent-runs", "", "recorded coding-agent runs to replay, as ctxd-bench eval --agent reads them (make figures passes $AGENT_RUNS)")
	f.IntVar(&o.AgentLimit, "agent-limit", 0, "replay only the first N agent runs (0: all)")
	return cmd
}

// prepare applies --quick to the size flags not given and checks the rest.
func (o *figuresOptions) prepare(fs *pflag.FlagSet) error {
	if o.FromJSON != "" {
		if o.Quick || o.SaveJSON != "" {
			return errors.New("--from-json: measures nothing, so --quick and --save-json do not apply")
		}
		return nil
	}
	if o.Quick {
		for name, v := range figuresQuick {
			if !fs.Changed(name) {
				if err := fs.Set(name, v); err != nil {
					return fmt.Errorf("--quick: %s=%s: %w", name, v, err)
				}
			}
		}
	}
	// The data has no default: it is not in the repository (see the README).
	var missing []string
	for name, v := range map[string]string{"turns": o.Turns, "questions": o.Questions, "floor": o.Floor, "agent-runs": o.AgentRuns} {
		if v == "" {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return usageErrorf("%s: the data to measure on is not set (make figures takes BENCH_DIR, BENCH_README and AGENT_RUNS)", strings.Join(missing, ", "))
	}
	switch {
	case o.Messages < 1 || o.Sessions < 1 || o.IngestMessages < 1:
		return errors.New("--messages, --sessions and --ingest-messages must be at least 1")
	case o.Clients < 1 || o.Clients > 256:
		return errors.New("--clients: must be in 1..256")
	case o.Duration <= 0 || o.LatencyDuration <= 0:
		return errors.New("--duration and --latency-duration must be positive")
	case o.EvalTurns < 0 || o.AgentLimit < 0:
		return errors.New("--eval-turns and --agent-limit must not be negative")
	}
	return nil
}

// figuresCommandLine is the command as given, flags in canonical form, so
// the header says exactly which sizes were measured.
func figuresCommandLine(cmd *cobra.Command) string {
	parts := []string{cmd.CommandPath()}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			parts = append(parts, "--"+f.Name)
			if f.Value.String() != "true" {
				parts[len(parts)-1] += "=" + f.Value.String()
			}
			return
		}
		parts = append(parts, "--"+f.Name+"="+benchDataPath(f.Value.String(), os.Getenv("BENCH_DATA")))
	})
	return strings.Join(parts, " ")
}

// benchDataPath quotes a flag's value for the header, with the evaluation
// data's directory (BENCH_DATA, as make figures passes it) written as
// $BENCH_DATA: where the data sits on the measuring machine is not part of
// the figures, and the data does not ship with the repository.
func benchDataPath(v, dataDir string) string {
	dataDir = strings.TrimSuffix(dataDir, "/")
	if dataDir != "" && strings.HasPrefix(v, dataDir+"/") {
		return "$BENCH_DATA/" + shellQuote(strings.TrimPrefix(v, dataDir+"/"))
	}
	return shellQuote(v)
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:,=+@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runFigures measures (or loads), renders and writes the block.
func runFigures(ctx context.Context, o figuresOptions, stdout, logw io.Writer) error {
	var docs figuresDocs
	var err error
	if o.FromJSON != "" {
		docs, err = loadFiguresDocs(o.FromJSON)
	} else {
		start := time.Now()
		docs, err = measureFigures(ctx, o, logw)
		fmt.Fprintf(logw, "figures: measured in %s\n", time.Since(start).Round(time.Second))
		if err == nil && o.SaveJSON != "" {
			err = docs.save(o.SaveJSON)
		}
	}
	if err != nil {
		return err
	}
	data, err := parseFiguresDocs(docs)
	if err != nil {
		return err
	}
	block := renderFigures(data)
	if o.Print {
		_, err = io.WriteString(stdout, block)
		return err
	}
	if err := writeFiguresBlock(o.Readme, block); err != nil {
		return err
	}
	fmt.Fprintf(logw, "figures: wrote the table into %s\n", o.Readme)
	return nil
}
