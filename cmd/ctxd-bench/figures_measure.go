package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// What the figures measure that the sizes do not set: the ingest goal is
// stated for 4 clients storing batches of 100 chat turns of 40-80 words,
// and the latency figures are one client's.
const (
	figIngestClients = 4
	figLatencyMix    = "search_all=1,search_session=1,context=1"
	figEvalWindow    = 4096
	figEvalBudget    = 2048
)

// measureFigures runs the bench phases and the eval in this process, each
// against an in-process server on a temporary data dir, and returns their
// JSON reports. The bench runs come first, so that the eval's garbage does
// not weigh on the in-process memory figures.
func measureFigures(ctx context.Context, o figuresOptions, logw io.Writer) (figuresDocs, error) {
	docs := figuresDocs{}
	meta := collectFiguresMeta(o.Command, time.Now())
	var err error
	if docs[figDocMeta], err = json.MarshalIndent(meta, "", "  "); err != nil {
		return nil, fmt.Errorf("figures: encode header: %w", err)
	}
	floor, err := readFloor(o.Floor)
	if err != nil {
		return nil, err
	}
	if docs[figDocFloor], err = json.MarshalIndent(floor, "", "  "); err != nil {
		return nil, fmt.Errorf("figures: encode floor: %w", err)
	}
	tmp, err := os.MkdirTemp("", "ctxd-figures-")
	if err != nil {
		return nil, fmt.Errorf("figures: temporary dir: %w", err)
	}
	defer os.RemoveAll(tmp)

	if err := figuresBench(ctx, o, filepath.Join(tmp, "data"), docs, logw); err != nil {
		return nil, err
	}
	if docs[figDocIngest], err = figuresIngestGoal(ctx, o, logw); err != nil {
		return nil, err
	}
	if docs[figDocEval], err = figuresEval(ctx, o, tmp, logw); err != nil {
		return nil, err
	}
	if docs[figDocAgent], err = figuresAgent(ctx, o, false, logw); err != nil {
		return nil, err
	}
	if docs[figDocGateway], err = figuresAgent(ctx, o, true, logw); err != nil {
		return nil, err
	}
	// Latencies mean little without how busy the machine was: the header
	// says the load average when the measurement began and ended.
	meta.LoadAvg = meta.LoadAvg + " / " + loadAvg("/proc/loadavg")
	if docs[figDocMeta], err = json.MarshalIndent(meta, "", "  "); err != nil {
		return nil, fmt.Errorf("figures: encode header: %w", err)
	}
	return docs, nil
}

// figuresBench builds the bench data set (ingest, then a timed restart),
// then measures one client's latency and the mixed load on it.
func figuresBench(ctx context.Context, o figuresOptions, dir string, docs figuresDocs, logw io.Writer) error {
	base := benchDefaults()
	base.Messages, base.Sessions, base.DataDir, base.Ctxd = o.Messages, o.Sessions, dir, o.Ctxd

	build := base
	build.Clients, build.Duration, build.Startup = figIngestClients, 0, true
	fmt.Fprintf(logw, "figures: bench data set: %d messages in %d sessions, then a timed restart\n", o.Messages, o.Sessions)
	rep, err := runBench(ctx, build, logw)
	if docs[figDocBench], err = figuresBenchJSON(rep, err, false); err != nil {
		return err
	}

	lat := base
	lat.SkipIngest, lat.Clients, lat.Duration, lat.Mix = true, 1, o.LatencyDuration, figLatencyMix
	fmt.Fprintf(logw, "figures: one client, %s of %s\n", o.LatencyDuration, figLatencyMix)
	rep, err = runBench(ctx, lat, logw)
	if docs[figDocLatency], err = figuresBenchJSON(rep, err, false); err != nil {
		return err
	}

	load := base
	load.SkipIngest, load.Clients, load.Duration = true, o.Clients, o.Duration
	fmt.Fprintf(logw, "figures: %d clients, %s of %s\n", o.Clients, o.Duration, load.Mix)
	rep, err = runBench(ctx, load, logw)
	docs[figDocLoad], err = figuresBenchJSON(rep, err, true)
	return err
}

// figuresIngestGoal stores chat turns into a fresh data dir the way the
// ingest goal is stated.
func figuresIngestGoal(ctx context.Context, o figuresOptions, logw io.Writer) ([]byte, error) {
	in := benchDefaults()
	in.Messages, in.Sessions, in.Clients, in.Duration = o.IngestMessages, o.Sessions, figIngestClients, 0
	in.ToolShare, in.WordsMin, in.WordsMax = 0, 40, 80
	fmt.Fprintf(logw, "figures: ingest goal run: %d chat messages of %d-%d words\n", in.Messages, in.WordsMin, in.WordsMax)
	rep, err := runBench(ctx, in, logw)
	return figuresBenchJSON(rep, err, false)
}

// figuresBenchJSON is a bench run's JSON report. Failed requests fail the
// run, except in the mixed load (tolerant), whose error count is a figure.
func figuresBenchJSON(rep *benchReport, err error, tolerant bool) ([]byte, error) {
	if rep == nil {
		return nil, err
	}
	if err != nil {
		stopped := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
		if !tolerant || rep.Mixed == nil || stopped {
			return nil, fmt.Errorf("figures: %w", err)
		}
	}
	if rep.Errors > 0 && !tolerant {
		return nil, fmt.Errorf("figures: bench: %d requests failed, e.g. %v", rep.Errors, rep.ErrorSamples)
	}
	var b bytes.Buffer
	if werr := rep.writeJSON(&b); werr != nil {
		return nil, werr
	}
	return b.Bytes(), nil
}

// figuresEval runs the eval (recall and evidence in window) as `make eval`
// does, on a subset with --eval-turns.
func figuresEval(ctx context.Context, o figuresOptions, tmp string, logw io.Writer) ([]byte, error) {
	turns, questions := o.Turns, o.Questions
	if o.EvalTurns > 0 {
		var err error
		if turns, questions, err = evalSubset(o.Turns, o.Questions, tmp, o.EvalTurns); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(logw, "figures: eval of %s\n", turns)
	rep, err := runEval(ctx, evalOptions{Turns: turns, Questions: questions, Out: filepath.Join(tmp, "eval-results.jsonl"),
		Ks: []int{5, 10, 20}, Mode: "hybrid", SkipAdversarial: true,
		Context: true, Window: figEvalWindow, Budget: figEvalBudget, ContextBatch: 2})
	return figuresJSON(rep, err)
}

// figuresJSON is an eval's JSON report, or the error that left none.
func figuresJSON(rep interface{ writeJSON(io.Writer) error }, err error) ([]byte, error) {
	if err != nil {
		return nil, fmt.Errorf("figures: %w", err)
	}
	var b bytes.Buffer
	if err := rep.writeJSON(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// evalSubset writes the first conversation's first n turns, and the
// questions whose evidence all lies in them, to dir.
func evalSubset(turnsPath, questionsPath, dir string, n int) (string, string, error) {
	var conv string
	kept := map[string]bool{}
	var turns, questions bytes.Buffer
	err := readJSONL(turnsPath, func(_ int, dec *json.Decoder) error {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		var t evalTurn
		if err := json.Unmarshal(raw, &t); err != nil {
			return err
		}
		if conv == "" {
			conv = t.ConvID
		}
		if t.ConvID == conv && len(kept) < n {
			kept[t.TurnID] = true
			turns.Write(raw)
			turns.WriteByte('\n')
		}
		return nil
	})
	if err != nil {
		return "", "", fmt.Errorf("--eval-turns: %w", err)
	}
	err = readJSONL(questionsPath, func(_ int, dec *json.Decoder) error {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		var q evalQuestion
		if err := json.Unmarshal(raw, &q); err != nil {
			return err
		}
		if q.ConvID != conv || len(q.Evidence) == 0 {
			return nil
		}
		for _, e := range q.Evidence {
			if !kept[e] {
				return nil
			}
		}
		questions.Write(raw)
		questions.WriteByte('\n')
		return nil
	})
	if err != nil {
		return "", "", fmt.Errorf("--eval-turns: %w", err)
	}
	tp, qp := filepath.Join(dir, "turns.jsonl"), filepath.Join(dir, "questions.jsonl")
	for p, b := range map[string]*bytes.Buffer{tp: &turns, qp: &questions} {
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			return "", "", fmt.Errorf("--eval-turns: %w", err)
		}
	}
	return tp, qp, nil
}

// figuresAgent replays the recorded agent runs (the first --agent-limit)
// as `make eval-agent` does (`make eval-gateway` with gateway): the
// script's window and budget, default session settings.
func figuresAgent(ctx context.Context, o figuresOptions, gateway bool, logw io.Writer) ([]byte, error) {
	fmt.Fprintf(logw, "figures: agent replay of %s (through the gateway: %v)\n", o.AgentRuns, gateway)
	opts := agentOptions{Runs: o.AgentRuns, Window: agentDefaultWindow, Budget: agentDefaultBudget,
		Limit: o.AgentLimit, Progress: logw, Ctxd: o.Ctxd, Gateway: gateway}
	rep, err := runAgentEval(ctx, opts)
	if err != nil || gateway {
		return figuresJSON(rep, err)
	}
	fmt.Fprintf(logw, "figures: agent replay with %d probes a run (prompted recall)\n", agentFigureProbes)
	opts.Probes = agentFigureProbes
	if rep.ProbeRun, err = runAgentEval(ctx, opts); err != nil {
		return nil, fmt.Errorf("figures: %w", err)
	}
	return figuresJSON(rep, nil)
}

// agentFigureProbes is the questions a run the figures ask (as the issue's
// --probes 4).
const agentFigureProbes = 4
