package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/server"
)

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "ctxd.yaml")
	os.WriteFile(file, []byte("addr: 127.0.0.1:7000\ndata_dir: /from/file\nlog_level: debug\ncontext_window: 32000\n"), 0o644)
	env := map[string]string{"CTXD_DATA_DIR": "/from/env", "CTXD_CONTEXT_WINDOW": "64000"}

	cmd := newServeCmd()
	var cfg Config
	cmd.ResetFlags()
	server.BindFlags(cmd.Flags(), &cfg)
	if err := cmd.Flags().Parse([]string{"--addr", "127.0.0.1:9000"}); err != nil {
		t.Fatal(err)
	}
	if err := server.ApplyLayers(cmd.Flags(), file, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:9000" {
		t.Errorf("addr = %s: the flag must win", cfg.Addr)
	}
	if cfg.DataDir != "/from/env" || cfg.ContextWindow != 64000 {
		t.Errorf("data_dir = %s, context_window = %d: the environment must win over the file", cfg.DataDir, cfg.ContextWindow)
	}
	if cfg.LogLevel != "debug" {
		t.Errorf("log_level = %s: the file must win over the default", cfg.LogLevel)
	}
	if cfg.Encoding != "o200k_base" {
		t.Errorf("encoding = %s: default expected", cfg.Encoding)
	}
}

func TestConfigErrorsNameTheSetting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ yaml, want string }{
		{"adress: x\n", `unknown setting "adress"`},
		{"context_window: lots\n", "context_window"},
	} {
		file := filepath.Join(dir, "c.yaml")
		os.WriteFile(file, []byte(c.yaml), 0o644)
		var cfg Config
		cmd := newServeCmd()
		cmd.ResetFlags()
		server.BindFlags(cmd.Flags(), &cfg)
		err := server.ApplyLayers(cmd.Flags(), file, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %q: err = %v, want it to mention %q", c.yaml, err, c.want)
		}
	}
	cfg := testConfig(dir)
	cfg.LogFormat = "xml"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "log-format") {
		t.Errorf("Validate = %v", err)
	}
	cfg = testConfig(dir)
	cfg.ExpansionWeight = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "expansion-weight") {
		t.Errorf("Validate with a negative expansion weight = %v", err)
	}
	cfg = testConfig(dir)
	cfg.FeedbackWeight = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "feedback-weight") {
		t.Errorf("Validate with a negative feedback weight = %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"read-timeout":             func(c *Config) { c.ReadTimeout = -1 },
		"max-header-bytes":         func(c *Config) { c.MaxHeaderBytes = 100 },
		"max-body-bytes-in-flight": func(c *Config) { c.MaxBodyInFlight = -1 },
		"disk-spare":               func(c *Config) { c.DiskSpare = -1 },
		"max-working":              func(c *Config) { c.MaxWorking = -1 },
		"max-wait":                 func(c *Config) { c.MaxWait = -1 },
	} {
		cfg = testConfig(dir)
		mutate(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Validate with a bad %s = %v", name, err)
		}
	}
}

// The connection settings reach the server from the YAML file and the
// environment like every other setting.
func TestConfigConnectionSettings(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("read_timeout: 5s\nmax_conns_per_ip: 7\nmax_body_bytes_in_flight: 1048576\n"), 0o644)
	var cfg Config
	cmd := newServeCmd()
	cmd.ResetFlags()
	server.BindFlags(cmd.Flags(), &cfg)
	env := map[string]string{"CTXD_READ_HEADER_TIMEOUT": "3s", "CTXD_DISK_SPARE": "0"}
	if err := server.ApplyLayers(cmd.Flags(), file, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if cfg.ReadTimeout != 5*time.Second || cfg.MaxConnsPerIP != 7 || cfg.MaxBodyInFlight != 1<<20 ||
		cfg.ReadHeaderTimeout != 3*time.Second || cfg.DiskSpare != 0 || cfg.IdleTimeout != 2*time.Minute {
		t.Fatalf("settings not applied: %+v", cfg)
	}
}
