package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ctxd/ctxd/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// addClientCommands adds the verbs that talk to a running server over HTTP.
func addClientCommands(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageErrorf("%v", err)
	})
	root.AddCommand(newStatusCmd(), newSessionsCmd(), newCompactCmd(), newDropsCmd(), newColdCmd(),
		newRecoverCmd(), newSearchCmd(), newContextCmd(), newResetCmd(), newLogsCmd())
}

// defaultServer is where `ctxd serve` listens by default.
const defaultServer = "http://127.0.0.1:8080"

// clientFlags are the flags every client verb takes.
type clientFlags struct {
	server  string
	apiKey  string
	json    bool
	timeout time.Duration
}

func (f *clientFlags) bind(fs *pflag.FlagSet) {
	// Defaults from the environment are read at run time, not shown here:
	// --help must not print an API key.
	fs.StringVar(&f.server, "server", defaultServer, "URL of the ctxd server (env CTXD_SERVER)")
	fs.StringVar(&f.apiKey, "api-key", "", "API key, sent as a bearer token (env CTXD_API_KEY)")
	fs.BoolVar(&f.json, "json", false, "print JSON for machines instead of text")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up on a request after this long")
}

func (f *clientFlags) client(fs *pflag.FlagSet) (*client.Client, error) {
	server, key := f.server, f.apiKey
	if env := os.Getenv("CTXD_SERVER"); env != "" && !fs.Changed("server") {
		server = env
	}
	if env := os.Getenv("CTXD_API_KEY"); env != "" && !fs.Changed("api-key") {
		key = env
	}
	return newAPIClient(server, key, f.timeout)
}

// verb is what a client verb runs with.
type verb struct {
	ctx  context.Context
	api  *client.Client
	out  io.Writer
	errw io.Writer
	in   io.Reader
	json bool
}

// clientVerb gives cmd the client flags and runs run with a client. Verb
// flags are bound by the caller before.
func clientVerb(cmd *cobra.Command, run func(v *verb, args []string) error) *cobra.Command {
	var f clientFlags
	f.bind(cmd.Flags())
	if cmd.Args != nil {
		cmd.Args = usageArgs(cmd.Args)
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		api, err := f.client(cmd.Flags())
		if err != nil {
			return err
		}
		err = run(&verb{ctx: cmd.Context(), api: api, out: cmd.OutOrStdout(), errw: cmd.ErrOrStderr(),
			in: cmd.InOrStdin(), json: f.json}, args)
		return explain(err, api, f.timeout)
	}
	return cmd
}

// usageArgs marks cobra's argument-count errors as usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageErrorf("%v; see ctxd %s --help", err, cmd.Name())
		}
		return nil
	}
}

// printJSON writes a JSON document, indented for a person reading it.
func (v *verb) printJSON(doc any) error {
	enc := json.NewEncoder(v.out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}
