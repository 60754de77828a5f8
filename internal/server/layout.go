package server

import "path/filepath"

// A data dir's layout, in one place for the server, the admin verbs and the
// metrics: the store, the full-text index, the cold mirror and the event logs.
func StorePath(dataDir string) string { return filepath.Join(dataDir, "ctxd.db") }
func IndexPath(dataDir string) string { return filepath.Join(dataDir, "index") }
func ColdPath(dataDir string) string  { return filepath.Join(dataDir, "cold") }
func LogsPath(dataDir string) string  { return filepath.Join(dataDir, "logs") }
