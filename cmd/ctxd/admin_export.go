package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/ctxd/ctxd/memory"
	"github.com/spf13/cobra"
)

func newExportCmd() *cobra.Command {
	var o memory.ExportOptions
	var out string
	cmd := &cobra.Command{
		Use:   "export (--session S | --all) [--tenant T] --out FILE [--vectors]",
		Short: "Write sessions with every message as JSON lines (server stopped)",
		Long: "Write sessions of a stopped server's data dir as JSON lines: a header (format, embedding model and dim, " +
			"time), then each session (all fields) followed by its messages (every field: ids, states, summaries' " +
			"sources, cold and pruning info, metadata, times, seq and turn). --vectors adds each message's vector. " +
			"--out - writes to stdout. `ctxd import` reads it back.",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Session, "session", "", "the session to export")
	fs.BoolVar(&o.All, "all", false, "export every session (of --tenant if given)")
	fs.StringVar(&o.Tenant, "tenant", "", "the tenant (default: the default tenant for --session, every tenant for --all)")
	fs.StringVar(&out, "out", "", "file to write, - for stdout")
	fs.BoolVar(&o.Vectors, "vectors", false, "include the vectors")
	return adminCmd(cmd, func(ctx context.Context, cmd *cobra.Command, cfg Config, _ []string) error {
		if out == "" {
			return fmt.Errorf("--out: required (a file, or - for stdout)")
		}
		if (o.Session == "") == !o.All {
			return fmt.Errorf("give one of --session S or --all")
		}
		d, err := openDataDir(ctx, cfg, indexNone, false, newProgress())
		if err != nil {
			return err
		}
		defer d.Close()
		rep, err := exportTo(ctx, d.admin, out, cmd.OutOrStdout(), o)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "exported %d sessions, %d messages\n", rep.Sessions, rep.Messages)
		return d.Close()
	})
}

// exportTo writes to stdout or to path, atomically: a failed export leaves
// no partial file under the name asked for.
func exportTo(ctx context.Context, a *memory.Admin, path string, stdout io.Writer, o memory.ExportOptions) (*memory.ExportReport, error) {
	if path == "-" {
		return a.Export(ctx, stdout, o)
	}
	tmp, err := os.CreateTemp(dirOf(path), ".export-*")
	if err != nil {
		return nil, fmt.Errorf("export to %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	rep, err := a.Export(ctx, tmp, o)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return nil, fmt.Errorf("export to %s: %w", path, err)
	}
	return rep, nil
}
