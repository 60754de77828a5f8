package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// collectFiguresMeta describes where and from what the figures come.
func collectFiguresMeta(command string, now time.Time) figuresMeta {
	return figuresMeta{Date: now.UTC().Format(time.RFC3339), Commit: gitCommit(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		CPUs: runtime.NumCPU(), CPUModel: cpuModel("/proc/cpuinfo"), GoVersion: runtime.Version(), Command: command,
		LoadAvg: loadAvg("/proc/loadavg")}
}

// loadAvg is the machine's one-minute load average from a loadavg file,
// "unknown" without one (a system other than Linux).
func loadAvg(path string) string {
	b, err := os.ReadFile(path)
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// gitCommit is the short HEAD of the working directory's repository, with
// "+dirty" when the tree differs from it (untracked files included: they
// can be part of the build); "unknown" without git or a repository.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	status, err := exec.Command("git", "status", "--porcelain").Output()
	if err != nil || len(strings.TrimSpace(string(status))) > 0 {
		commit += "+dirty"
	}
	return commit
}

// cpuModel is the first "model name" of cpuinfo, "unknown" when absent (as
// on some arm64 kernels).
func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.Join(strings.Fields(val), " ")
		}
	}
	return "unknown"
}
