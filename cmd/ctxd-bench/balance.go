package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"

	"github.com/spf13/cobra"
)

// newBalanceCmd is a round-robin HTTP load balancer on loopback, no
// affinity: `make bench-postgres` puts it in front of two ctxd nodes on one
// database, so that every other request of a session goes to the other
// node (the case a load balancer without affinity makes).
func newBalanceCmd() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "balance --listen 127.0.0.1:PORT URL...",
		Short: "Round-robin load balancer on loopback in front of ctxd nodes (for make bench-postgres)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var backends []*url.URL
			for _, a := range args {
				base, err := benchLoopbackURL(ctx, "node", a)
				if err != nil {
					return err
				}
				u, err := url.Parse(base)
				if err != nil {
					return err
				}
				backends = append(backends, u)
			}
			ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "balancing http://%s over %d nodes\n", ln.Addr(), len(backends))
			return serveBalanced(ctx, ln, backends)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on (loopback)")
	return cmd
}

// serveBalanced proxies each request to the next backend in turn.
func serveBalanced(ctx context.Context, ln net.Listener, backends []*url.URL) error {
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(backends[(next.Add(1)-1)%uint64(len(backends))])
		},
		Transport: benchHTTPClient(256).Transport,
	}
	srv := &http.Server{Handler: proxy}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
