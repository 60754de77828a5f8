// Command ctxd is the context-memory server for LLM agents and its CLI.
package main

import (
	"context"
	"os"

	"github.com/ctxd/ctxd/internal/version"
	"github.com/spf13/cobra"
)

func main() {
	err := newRootCmd().ExecuteContext(context.Background())
	os.Exit(reportError(os.Stderr, err))
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "ctxd",
		Short:         "ctxd: a context-memory server for LLM agents",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().String(),
	}
	root.SetVersionTemplate("ctxd {{.Version}}\n")
	root.AddCommand(newServeCmd())
	root.AddCommand(newMCPCmd())
	addClientCommands(root)
	addAdminCommands(root)
	return root
}
