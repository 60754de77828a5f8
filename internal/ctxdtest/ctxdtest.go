// Package ctxdtest opens a real ctxd service for the tests of packages that
// cannot start the binary's Main (it is package main): a bbolt store, the
// Bleve index, the embedded GloVe embedder, tiktoken, extractive summaries,
// the event log and the cold store, all under one directory.
package ctxdtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/ctxd/ctxd/coldstore"
	"github.com/ctxd/ctxd/eventlog"
	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/index/glove"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
	"github.com/ctxd/ctxd/summarize"
	"github.com/ctxd/ctxd/tokenizer"
)

// Stack is an open service and what it was opened on.
type Stack struct {
	Service *memory.Service
	Store   *boltstore.Store
	Index   *index.Index
	Events  *eventlog.Log
}

// Open opens a service on dir (created by the caller, usually t.TempDir())
// with the server's defaults. The caller closes it.
func Open(ctx context.Context, dir string) (_ *Stack, err error) {
	st := &Stack{}
	defer func() {
		if err != nil {
			err = errors.Join(err, st.Close())
		}
	}()
	if st.Store, err = boltstore.Open(filepath.Join(dir, "ctxd.db"), false); err != nil {
		return nil, err
	}
	if st.Index, err = index.Open(filepath.Join(dir, "index"), index.Options{Texts: st.Store}); err != nil {
		return nil, err
	}
	if st.Events, err = eventlog.Open(filepath.Join(dir, "logs"), eventlog.Options{}); err != nil {
		return nil, err
	}
	cold, err := coldstore.Open(filepath.Join(dir, "cold"))
	if err != nil {
		return nil, err
	}
	emb, err := glove.Default()
	if err != nil {
		return nil, err
	}
	tok := tokenizer.New()
	st.Service = &memory.Service{Store: st.Store, Index: st.Index, Embedder: emb, Tokenizer: tok,
		Summarizer: summarize.NewExtractive(tok, emb), Logger: slog.New(slog.DiscardHandler),
		Cold: coldstore.Mirror{Store: cold}, Events: st.Events, EventReader: st.Events}
	if err := st.Service.Open(ctx); err != nil {
		st.Service = nil // not open: nothing to close
		return nil, fmt.Errorf("open service: %w", err)
	}
	return st, nil
}

// Close closes the service, then what it was opened on.
func (st *Stack) Close() error {
	var errs []error
	if st.Service != nil {
		errs = append(errs, st.Service.Close())
	}
	if st.Index != nil {
		errs = append(errs, st.Index.Close())
	}
	if st.Events != nil {
		errs = append(errs, st.Events.Close())
	}
	if st.Store != nil {
		errs = append(errs, st.Store.Close())
	}
	return errors.Join(errs...)
}
