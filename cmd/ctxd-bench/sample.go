package main

import (
	"github.com/ctxd/ctxd/internal/benchsample"
	"github.com/spf13/cobra"
)

// `ctxd-bench sample` writes the synthetic benchmark of package
// benchsample, which `make eval` and `make eval-agent` run on when the
// evaluation data is not there.
func newSampleCmd() *cobra.Command {
	o := benchsample.Defaults
	cmd := &cobra.Command{
		Use:   "sample --out DIR",
		Short: "Write a small synthetic benchmark (LoCoMo-shaped conversations, agent runs) for a smoke run of eval",
		Long: "Write DIR/" + benchsample.LoCoMoDir + "/turns.jsonl and questions.jsonl (synthetic conversations in LoCoMo's\n" +
			"format, each question with its evidence turns) and DIR/" + benchsample.AgentRunsFile + " (synthetic tool-loop agent\n" +
			"runs in the recorded runs' format). The same seed writes the same files. The figures of an eval on them check\n" +
			"that the commands run; they are not a measure of ctxd (use LoCoMo and recorded runs: see the README).",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := o.Validate(); err != nil {
				return usageErrorf("%v", err)
			}
			return benchsample.Write(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "", "directory to write into (created if needed)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "random seed")
	f.IntVar(&o.Conversations, "conversations", o.Conversations, "conversations")
	f.IntVar(&o.Sessions, "sessions", o.Sessions, "dated sessions per conversation")
	f.IntVar(&o.Turns, "turns", o.Turns, "turns per session")
	f.IntVar(&o.Runs, "runs", o.Runs, "agent runs")
	f.IntVar(&o.Steps, "steps", o.Steps, "tool calls per agent run")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}
