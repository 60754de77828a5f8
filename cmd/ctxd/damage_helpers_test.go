package main

import (
	"bufio"
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// liveBinary is the real ctxd running as its own process, with its log kept.
type liveBinary struct {
	cmd *exec.Cmd
	URL string

	mu   sync.Mutex
	log  strings.Builder
	done chan struct{} // closed when the log reached EOF
}

// Log is what the process wrote to stderr so far.
func (b *liveBinary) Log() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.log.String()
}

// Stop ends the process with SIGTERM (a clean shutdown) and waits for it.
func (b *liveBinary) Stop(t *testing.T) {
	t.Helper()
	if b.cmd.ProcessState != nil {
		return
	}
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("stop ctxd: %v", err)
	}
	<-b.done
	if err := b.cmd.Wait(); err != nil {
		t.Fatalf("ctxd exited with %v; log:\n%s", err, b.Log())
	}
}

// runBinary starts `ctxd serve` on dir with extra flags. It returns once the
// process listens, or once it exited (then URL is "" and the error is the
// exit status): a refusal to start is something tests look for.
func runBinary(t *testing.T, dir string, flags ...string) (*liveBinary, error) {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir}, flags...)
	cmd := exec.Command(ctxdBinary(t), args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &liveBinary{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		defer close(b.done)
		r := bufio.NewReader(stderr)
		for {
			line, err := r.ReadString('\n')
			b.mu.Lock()
			b.log.WriteString(line)
			b.mu.Unlock()
			if m := listenRe.FindStringSubmatch(line); m != nil {
				found <- m[1]
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-b.done
			_ = cmd.Wait()
		}
	})
	select {
	case addr := <-found:
		b.URL = "http://" + addr
		return b, nil
	case <-b.done:
		return b, cmd.Wait()
	case <-time.After(2 * time.Minute):
		t.Fatalf("ctxd neither listened nor exited; log:\n%s", b.Log())
	}
	return nil, nil
}

// mustRunBinary is runBinary that fails the test when the process does not
// start.
func mustRunBinary(t *testing.T, dir string, flags ...string) *liveBinary {
	t.Helper()
	b, err := runBinary(t, dir, flags...)
	if err != nil {
		t.Fatalf("ctxd serve exited: %v; log:\n%s", err, b.Log())
	}
	return b
}

// client is a testServer that talks to b.
func (b *liveBinary) client(t *testing.T, dir string) *testServer {
	return &testServer{t: t, URL: b.URL, Dir: dir}
}

// copyDir copies a stopped server's data dir, so each damage case starts
// from the same data.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatalf("copy data dir: %v", err)
	}
}

// trimChangeLog forgets the whole change log of a stopped server's store, as
// the maintain loop does once the index holds it.
func trimChangeLog(t *testing.T, dir string) uint64 {
	t.Helper()
	st, err := openStoreOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	last, err := st.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.TrimChanges(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	if rest, err := st.Changes(context.Background(), 0, 0); err != nil || len(rest) != 0 {
		t.Fatalf("change log after the trim: %d entries, %v", len(rest), err)
	}
	return last
}
