package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// startBinary runs the real binary, with flags added to its defaults, and
// returns its base URL once it listens.
func startBinary(t *testing.T, dir string, flags ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(ctxdBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir}, flags...)...)
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

// killRounds is how many times a kill test kills the real binary: def, or
// CTXD_KILL_ROUNDS when set (`make crash` sets it to run many more).
func killRounds(t *testing.T, def int) int {
	t.Helper()
	if s := os.Getenv("CTXD_KILL_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CTXD_KILL_ROUNDS=%q: want a positive count", s)
		}
		return n
	}
	return def
}

// The real binary is killed with SIGKILL at random moments, 20 times (or
// CTXD_KILL_ROUNDS), while concurrent writers store into a roomy session
// and into a small one that compacts all the time. After every restart, every acknowledged message is
// present (as itself or in a summary's sources), a sample is searchable, and
// the counters match the messages.
func TestSIGKILLRounds(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	killRounds := killRounds(t, 20)
	rng := testRand(t, 0)
	dir := t.TempDir()
	var mu sync.Mutex
	acked := map[string][]string{} // session -> ids
	words := map[string]string{}   // id in "crash" -> its unique word
	for round := 0; round <= killRounds; round++ {
		cmd, url := startBinary(t, dir)
		ts := &testServer{t: t, URL: url, Dir: dir}
		if round == 0 {
			ts.mustDo(200, "PUT", "/v1/sessions/cmp", map[string]any{"context_window": 1500})
		}
		checkAfterCrash(t, ts, acked, words, rng)
		if round == killRounds {
			st := ts.mustDo(200, "GET", "/v1/sessions/cmp", nil)
			if st["compactions"].(float64) == 0 {
				t.Fatal("no compaction ran before the kills")
			}
			t.Logf("%d kill rounds: %d + %d acknowledged writes, %v compactions, all present after every restart",
				killRounds, len(acked["crash"]), len(acked["cmp"]), st["compactions"])
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			return
		}
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
					session, word := "crash", fmt.Sprintf("tok%dx%dx%d", round, w, i)
					body := map[string]any{"messages": []any{msg("user", "note "+word+" about the crash test"), msg("assistant", "ack "+word)}}
					if w%2 == 1 {
						session = "cmp"
						body = map[string]any{"messages": []any{msg("user", chatter(round*1000+w*100+i))}}
					}
					status, res, err := postJSON(url+"/v1/sessions/"+session+"/messages", body)
					if err != nil || status != 201 {
						return // the process is gone: this write was never acknowledged
					}
					mu.Lock()
					for _, id := range res["ids"].([]any) {
						acked[session] = append(acked[session], id.(string))
						if session == "crash" {
							words[id.(string)] = word
						}
					}
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(time.Duration(150+rng.IntN(900)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		close(stop)
		wg.Wait()
	}
}

// testRand is a random source seeded by the clock, or by CTXD_TEST_SEED to
// replay a failure; the seed is logged. stream keeps tests apart.
func testRand(t *testing.T, stream uint64) *rand.Rand {
	seed := time.Now().UnixNano()
	if s := os.Getenv("CTXD_TEST_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (set CTXD_TEST_SEED to replay)", seed)
	return rand.New(rand.NewPCG(uint64(seed), stream))
}

func checkAfterCrash(t *testing.T, ts *testServer, acked map[string][]string, words map[string]string, rng *rand.Rand) {
	t.Helper()
	if len(acked["crash"]) == 0 {
		return
	}
	checkReachable(t, ts, "crash", acked["crash"])
	checkReachable(t, ts, "cmp", acked["cmp"])
	checkCounters(t, ts, "crash")
	checkCounters(t, ts, "cmp")
	ids := acked["crash"]
	for range 5 {
		id := ids[len(ids)-1-rng.IntN(min(len(ids), 50))] // the newest are the likeliest to be lost
		word := words[id]
		found := false
		for _, r := range ts.search(map[string]any{"query": word, "session_id": "crash", "mode": "text", "k": 3}) {
			found = found || r.ID == id
		}
		if !found {
			t.Fatalf("acknowledged message %s (%s) not searchable after restart", id, word)
		}
	}
}
