package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// newMCPCmd is `ctxd mcp`: the MCP tools over stdio, for clients that
// start their servers as commands (Claude Desktop, Claude Code, Cursor),
// each call made on a running ctxd through the client package.
func newMCPCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve ctxd's memory tools to an MCP client over stdio",
		Long: "Speak the Model Context Protocol on stdin and stdout, offering the tools memory_search, memory_save, " +
			"memory_context, memory_recover, memory_get and session_status, and each session as the resource " +
			"ctxd://sessions/{id}. Every call goes to the ctxd server at --server as the tenant of --api-key. " +
			"Logs go to stderr. A client that speaks HTTP can use the server's /mcp instead.",
		Example: "  ctxd mcp --server http://127.0.0.1:8080\n  CTXD_API_KEY=... ctxd mcp",
		Args:    usageArgs(cobra.NoArgs),
	}
	fs := cmd.Flags()
	fs.StringVar(&f.server, "server", defaultServer, "URL of the ctxd server (env CTXD_SERVER)")
	fs.StringVar(&f.apiKey, "api-key", "", "API key, sent as a bearer token (env CTXD_API_KEY)")
	fs.DurationVar(&f.timeout, "timeout", client.DefaultTimeout, "give up on a request to the server after this long")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := f.client(fs)
		if err != nil {
			return err
		}
		// stdout carries the protocol: every word for a person goes to stderr.
		log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		ctx := cmd.Context()
		if err := c.Health(ctx); err != nil {
			// Not fatal: the client may start before the server does; each
			// call says "unavailable" until it is up.
			log.Warn("the ctxd server does not answer yet; tools will fail until it does", "server", c.BaseURL(), "err", err)
		}
		s := mcpserver.New(&mcpserver.ClientBackend{Client: c}, mcpserver.Options{Logger: log})
		err = s.Run(ctx, &mcp.StdioTransport{})
		if errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("mcp over stdio: %w", err)
		}
		return nil
	}
	return cmd
}
