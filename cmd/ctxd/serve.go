package main

import (
	"errors"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/ctxd/ctxd/internal/server"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var cfg Config
	var configPath string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the ctxd server",
		Long: "Run the ctxd server. Every flag can also be set with the environment variable CTXD_<FLAG> " +
			"(e.g. CTXD_DATA_DIR) or in the YAML file given by --config (e.g. data_dir: /var/lib/ctxd); " +
			"flags win over the environment, which wins over the file.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := server.ApplyLayers(cmd.Flags(), configPath, os.Getenv); err != nil {
				return err
			}
			if err := cfg.LoadKeys(configPath); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			if os.Getenv("GOGC") == "" {
				// Ingest allocates heavily (tokenizer, Bleve analysis); GC at
				// 100% took a large share of CPU. 200 trades some heap for it.
				debug.SetGCPercent(200)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			m := NewMain(cfg)
			routeLibraryLog(m.Logger)
			if err := m.Run(ctx, nil); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				m.Logger.Info("shutting down")
				return m.Close()
			case err := <-m.Failed():
				// As a start that met the damage refused to: the log and
				// the exit status name it.
				m.Logger.Error("stopping: the server cannot go on", "err", err)
				return errors.Join(err, m.Close())
			}
		},
	}
	server.BindFlags(cmd.Flags(), &cfg)
	cmd.Flags().StringVar(&configPath, "config", os.Getenv("CTXD_CONFIG"), "YAML config file")
	return cmd
}

// routeLibraryLog sends what libraries print through the standard log
// package into the server's log as warnings: Bleve says there, for one,
// that it could not load the index's newest snapshot and fell back to an
// older one, which would otherwise be an unstructured stderr line that
// log collectors reading ctxd's JSON drop.
func routeLibraryLog(l *slog.Logger) {
	log.SetFlags(0)
	log.SetOutput(slog.NewLogLogger(l.With("component", "library").Handler(), slog.LevelWarn).Writer())
}
