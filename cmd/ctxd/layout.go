package main

import "path/filepath"

// A data dir's layout, in one place for the server, the admin verbs and the
// metrics: the store, the full-text index, the cold mirror and the event logs.
func storePath(dataDir string) string { return filepath.Join(dataDir, "ctxd.db") }
func indexPath(dataDir string) string { return filepath.Join(dataDir, "index") }
func coldPath(dataDir string) string  { return filepath.Join(dataDir, "cold") }
func logsPath(dataDir string) string  { return filepath.Join(dataDir, "logs") }
