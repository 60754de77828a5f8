package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/memory/admin"
	"github.com/spf13/cobra"
)

func newExportCmd() *cobra.Command {
	var o admin.ExportOptions
	var out, server, apiKey string
	var timeout time.Duration
	var explicitServer bool
	cmd := &cobra.Command{
		Use:   "export (--session S | --all) [--tenant T] --out FILE [--vectors] [--server URL [--api-key K]]",
		Short: "Write sessions with every message as JSON lines (server stopped, or online with --server)",
		Long: "Write sessions of a stopped server's data dir as JSON lines: a header (format, embedding model and dim, " +
			"time), then each session (all fields) followed by its messages (every field: ids, states, summaries' " +
			"sources, cold and pruning info, metadata, times, seq and turn), then a trailer that says the export is " +
			"complete and counts its sessions and messages. --vectors adds each message's vector. --out - writes to " +
			"stdout. With --server URL the export comes from a running server (GET /v1/export) instead, from one " +
			"consistent snapshot while it keeps serving: --api-key's tenant only, or with an admin key any --tenant " +
			"or, with --all and no --tenant, every tenant. The file appears only once the export is whole. " +
			"`ctxd import` reads it back.",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Session, "session", "", "the session to export")
	fs.BoolVar(&o.All, "all", false, "export every session (of --tenant if given)")
	fs.StringVar(&o.Tenant, "tenant", "", "the tenant (default: the default tenant for --session, every tenant for --all)")
	fs.StringVar(&out, "out", "", "file to write, - for stdout")
	fs.BoolVar(&o.Vectors, "vectors", false, "include the vectors")
	fs.StringVar(&server, "server", "", "export from the ctxd server at this URL instead of a data dir")
	fs.StringVar(&apiKey, "api-key", "", "API key for --server (env CTXD_API_KEY)")
	fs.DurationVar(&timeout, "timeout", 2*time.Minute, "with --server, how long to wait for the export to begin")
	cmd = adminCmd(cmd, func(ctx context.Context, cmd *cobra.Command, cfg Config, _ []string) error {
		if out == "" {
			return fmt.Errorf("--out: required (a file, or - for stdout)")
		}
		if (o.Session == "") == !o.All {
			return fmt.Errorf("give one of --session S or --all")
		}
		if !explicitServer {
			server = ""
		}
		if server != "" {
			api, err := newAPIClient(server, apiKey, timeout)
			if err != nil {
				return err
			}
			rep, err := exportTo(out, cmd.OutOrStdout(), func(w io.Writer) (*admin.ExportReport, error) {
				return exportRemote(ctx, api, w, o, timeout)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d sessions, %d messages from %s\n", rep.Sessions, rep.Messages, server)
			return nil
		}
		d, err := openDataDir(ctx, cfg, indexNone, false, newProgress())
		if err != nil {
			return err
		}
		defer d.Close()
		rep, err := exportTo(out, cmd.OutOrStdout(), func(w io.Writer) (*admin.ExportReport, error) {
			return d.admin.Export(ctx, w, o)
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "exported %d sessions, %d messages\n", rep.Sessions, rep.Messages)
		return d.Close()
	})
	// adminCmd fills unset flags from CTXD_ variables, and CTXD_SERVER is
	// set for the client verbs: a local export must not turn into a remote
	// one because of it. Only --server on the command line counts.
	runE := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		explicitServer = cmd.Flags().Changed("server")
		return runE(cmd, args)
	}
	return cmd
}

// exportRemote streams GET /v1/export into w, reading it through as it
// goes: the stream answered 200 before it was read, so only its trailer
// (or a cut connection) says whether it is whole.
func exportRemote(ctx context.Context, api *client.Client, w io.Writer, o admin.ExportOptions, timeout time.Duration) (*admin.ExportReport, error) {
	body, err := api.Export(ctx, o)
	if err != nil {
		return nil, explain(err, api, timeout)
	}
	defer body.Close()
	rep, err := admin.CheckExport(io.TeeReader(body, w))
	if err != nil {
		return nil, fmt.Errorf("export from %s: %w", api.BaseURL(), err)
	}
	return rep, nil
}

// exportTo writes to stdout or to path, atomically: a failed export leaves
// no partial file under the name asked for.
func exportTo(path string, stdout io.Writer, write func(io.Writer) (*admin.ExportReport, error)) (*admin.ExportReport, error) {
	if path == "-" {
		return write(stdout)
	}
	tmp, err := os.CreateTemp(dirOf(path), ".export-*")
	if err != nil {
		return nil, fmt.Errorf("export to %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	rep, err := write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = syncDir(dirOf(path))
	}
	if err != nil {
		return nil, fmt.Errorf("export to %s: %w", path, err)
	}
	return rep, nil
}

// syncDir makes a rename in dir durable: until the directory is synced, a
// crash can bring back the old name.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
