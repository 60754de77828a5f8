package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// benchLoopbackURL checks that raw is an http(s) base URL of a loopback host
// and returns it without a trailing slash. The bench generates load: it must
// never point at anything but this machine.
func benchLoopbackURL(ctx context.Context, flag, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--%s: %q is not an http(s) URL like http://127.0.0.1:8080", flag, raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("--%s: %q must be a base URL (scheme://host:port) without path, query or credentials", flag, raw)
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil || len(addrs) == 0 {
			return "", fmt.Errorf("--%s: cannot resolve localhost: %v", flag, err)
		}
		for _, a := range addrs {
			if !a.IP.IsLoopback() {
				return "", fmt.Errorf("--%s: localhost resolves to %s, which is not a loopback address", flag, a.IP)
			}
		}
	} else if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("--%s: %q is not a loopback address (127.0.0.0/8, ::1 or localhost): the bench only loads this machine", flag, host)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host, "/"), nil
}

// benchHTTPClient only ever connects to loopback addresses, never through a
// proxy, and follows no redirects.
func benchHTTPClient(conns int) *http.Client {
	d := &net.Dialer{
		Timeout: 5 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("bench: refusing to connect to non-loopback address %s", address)
			}
			return nil
		},
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         d.DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// benchProcMem is what /proc/<pid>/status says about memory, in bytes.
type benchProcMem struct {
	RSS, HWM   int64
	Anon, File int64 // RssAnon, RssFile: heap and the like; mapped files (bolt's mmap), which the kernel can drop
}

func benchReadProcMem(pid string) (benchProcMem, error) {
	f, err := os.Open(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return benchProcMem{}, err
	}
	defer f.Close()
	var m benchProcMem
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		case "RssAnon":
			dst = &m.Anon
		case "RssFile":
			dst = &m.File
		}
		if !ok || dst == nil {
			continue
		}
		fields := strings.Fields(v) // "123456 kB"
		if len(fields) != 2 || fields[1] != "kB" {
			return m, fmt.Errorf("/proc/%s/status: unexpected %s line %q", pid, k, sc.Text())
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("/proc/%s/status: %s: %w", pid, k, err)
		}
		*dst = n << 10
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("/proc/%s/status has no VmRSS", pid)
	}
	return m, nil
}

// benchLoadAvg is /proc/loadavg's first three fields.
func benchLoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// benchDirSize sums the sizes of the regular files under dir, in total and
// per top-level entry.
func benchDirSize(dir string) (int64, map[string]int64, error) {
	parts := map[string]int64{}
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking (index segments merge)
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		parts[top] += info.Size()
		total += info.Size()
		return nil
	})
	return total, parts, err
}

// benchPercentile is the nearest-rank percentile of sorted.
func benchPercentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func benchMS(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

func benchMB(n int64) float64 { return math.Round(float64(n)/(1<<20)*10) / 10 }

// benchCPU is the CPU time (user + system) pid has used so far: "self" from
// getrusage, another process from /proc/<pid>/stat (in USER_HZ ticks, 100 a
// second on Linux).
func benchCPU(pid string) (time.Duration, error) {
	if pid == "self" {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0, err
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
	}
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces
	f := strings.Fields(s[i+1:])       // f[0] is field 3 (state): utime is field 14, stime 15
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: unexpected format", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%s/stat: bad utime/stime", pid)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}
