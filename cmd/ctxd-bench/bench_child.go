package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/ctxd/ctxd/client"
)

// childServer is `ctxd serve` run as a child process on a free loopback
// port, as the eval's agent replay and the bench's fresh start run it.
type childServer struct {
	URL    string
	Pid    int
	cmd    *exec.Cmd
	exited chan error // receives the child's exit, once
}

// startChild starts `exe serve` on dir. The child does not see this
// process's CTXD_* variables: it runs with the defaults, as the in-process
// servers do, whatever the shell that started the bench has set.
func startChild(exe, dir string, stderr io.Writer) (*childServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start %s serve: %w", exe, err)
	}
	addr := ln.Addr().String()
	ln.Close() // the child listens on it; another process taking it first fails the start
	cmd := exec.Command(exe, "serve", "--data-dir", dir, "--addr", addr, "--log-level", "warn")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CTXD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", exe, err)
	}
	s := &childServer{URL: "http://" + addr, Pid: cmd.Process.Pid, cmd: cmd, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }()
	return s, nil
}

// stop sends SIGTERM, so the child shuts down as `ctxd serve` does, and
// waits a minute for it to exit before killing it.
func (s *childServer) stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signal the server: %w", err)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			return fmt.Errorf("server exit: %w", err)
		}
		return nil
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		return fmt.Errorf("did not stop within a minute of SIGTERM; killed: %v", <-s.exited)
	}
}

// waitReady asks c's /readyz until it answers 200, timeout passes, or the
// server's process exits (exited; nil for a server of this process).
func waitReady(ctx context.Context, c *client.Client, timeout time.Duration, exited <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Ready(rctx)
		rcancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("server at %s exited before it was ready (%v): %w", c.BaseURL(), werr, err)
		case <-ctx.Done():
			return fmt.Errorf("server at %s not ready after %s: %w", c.BaseURL(), timeout, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// benchAPIClient is a client of base through hc that never retries: a 429
// or 503 is an error of the run, not something to hide in its latencies.
func benchAPIClient(base string, hc *http.Client) (*client.Client, error) {
	return client.New(base, client.WithHTTPClient(hc), client.WithTimeout(0), client.WithRetries(0, 0),
		client.WithUserAgent("ctxd-bench"))
}

// errNotFoundOK is err, unless it says the thing was not there.
func errNotFoundOK(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Status == http.StatusNotFound {
		return nil
	}
	return err
}
