package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildBinary compiles ctxd once per test binary run.
var buildOnce struct {
	sync.Once
	path string
	err  error
}

func ctxdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ctxd-bin-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "ctxd")
		out, err := exec.Command("go", "build", "-o", buildOnce.path, ".").CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.path
}

var listenRe = regexp.MustCompile(`ctxd listening.* addr=(\S+)`)

// startBinary runs the real binary and returns its base URL once it listens.
func startBinary(t *testing.T, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(ctxdBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listenRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case addr := <-found:
		return cmd, "http://" + addr
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("binary did not start listening")
	}
	return nil, ""
}

func postJSON(url string, body any) (int, map[string]any, error) {
	b, _ := json.Marshal(body)
	res, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var out map[string]any
	err = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out, err
}

// An acknowledged write survives SIGKILL of the real binary, and is
// searchable after restart.
func TestAckedWritesSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	dir := t.TempDir()
	acked := map[string]string{} // id -> unique word in its content
	var mu sync.Mutex
	for round := 0; round < 3; round++ {
		cmd, url := startBinary(t, dir)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					word := fmt.Sprintf("tok%dx%dx%d", round, w, i)
					status, body, err := postJSON(url+"/v1/sessions/crash/messages", map[string]any{"messages": []any{
						msg("user", "note "+word+" about the crash test"), msg("assistant", "ack "+word)}})
					if err != nil || status != 201 {
						return // the process is gone: this write was never acknowledged
					}
					mu.Lock()
					for j, id := range body["ids"].([]any) {
						if j == 0 {
							acked[id.(string)] = word
						}
					}
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(time.Duration(300+round*200) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		close(stop)
		wg.Wait()
	}
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged before the kills")
	}

	cmd, url := startBinary(t, dir)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	stored := map[string]bool{}
	cursor := ""
	for {
		res, err := http.Get(url + "/v1/sessions/crash/messages?limit=1000&cursor=" + cursor)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Messages []struct {
				ID string `json:"id"`
			} `json:"messages"`
			Next string `json:"next_cursor"`
		}
		json.NewDecoder(res.Body).Decode(&page)
		res.Body.Close()
		for _, m := range page.Messages {
			stored[m.ID] = true
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	checked := 0
	for id, word := range acked {
		if !stored[id] {
			t.Fatalf("acknowledged message %s lost after SIGKILL", id)
		}
		if checked < 20 { // search a sample: every one would be slow under -race
			status, body, err := postJSON(url+"/v1/search", map[string]any{"query": word, "session_id": "crash", "mode": "text", "k": 3})
			if err != nil || status != 200 {
				t.Fatalf("search: %d %v", status, err)
			}
			found := false
			for _, r := range body["results"].([]any) {
				found = found || r.(map[string]any)["id"] == id
			}
			if !found {
				t.Fatalf("acknowledged message %s (%s) not searchable after restart", id, word)
			}
			checked++
		}
	}
	t.Logf("%d acknowledged writes across 3 SIGKILLs, all present", len(acked))
}

// Killing the process while compactions run leaves every session as before
// or as after each compaction: nothing acknowledged lost, counters right.
func TestSIGKILLDuringCompactions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	dir := t.TempDir()
	var acked []string
	var mu sync.Mutex
	for round := 0; round < 4; round++ {
		cmd, url := startBinary(t, dir)
		if round == 0 {
			req, _ := http.NewRequest("PUT", url+"/v1/sessions/cmp", bytes.NewReader([]byte(`{"context_window": 1500}`)))
			res, err := http.DefaultClient.Do(req)
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("create session: %v", err)
			}
			res.Body.Close()
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					status, body, err := postJSON(url+"/v1/sessions/cmp/messages", map[string]any{"messages": []any{msg("user", chatter(round*1000+w*100+i))}})
					if err != nil || status != 201 {
						return
					}
					mu.Lock()
					acked = append(acked, body["ids"].([]any)[0].(string))
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(time.Duration(400+round*150) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		close(stop)
		wg.Wait()
	}
	cmd, url := startBinary(t, dir)
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	ts := &testServer{t: t, URL: url, Dir: dir}
	checkReachable(t, ts, "cmp", acked)
	checkCounters(t, ts, "cmp")
	st := ts.mustDo(200, "GET", "/v1/sessions/cmp", nil)
	if st["compactions"].(float64) == 0 {
		t.Fatal("no compaction ran before the kills")
	}
	t.Logf("%d acknowledged writes, %v compactions across 4 SIGKILLs: all reachable, counters consistent", len(acked), st["compactions"])
}
