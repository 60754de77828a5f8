// Command ctxd is the context-memory server for LLM agents and its CLI.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "ctxd:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "ctxd",
		Short:         "ctxd: a context-memory server for LLM agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd())
	root.AddCommand(newEvalCmd())
	root.AddCommand(newBenchCmd())
	addClientCommands(root)
	addAdminCommands(root)
	return root
}
