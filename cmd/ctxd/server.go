package main

import "github.com/ctxd/ctxd/internal/server"

// The server itself (opening the store, indexes and service, and serving
// HTTP) is internal/server's, which cmd/ctxd-bench runs in process too.
type (
	Main   = server.Main
	Config = server.Config
)

// NewMain returns a Main for cfg.
var NewMain = server.NewMain
