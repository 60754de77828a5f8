package main

import (
	"fmt"
	"io"
	"os"
)

// openImport opens the export to import; "-" is stdin, spooled to a
// temporary file first, because an import reads its file twice (a check
// of every line before anything is written, then the writes). It makes a
// move one command line: `ctxd export --all --vectors --out - | ctxd import
// --store postgres://... -`.
func openImport(path string, stdin io.Reader) (*os.File, error) {
	if path != "-" {
		return os.Open(path)
	}
	f, err := os.CreateTemp("", "ctxd-import-*.jsonl")
	if err != nil {
		return nil, err
	}
	// Unlinked at once: the open file stays readable and nothing is left
	// behind, whatever ends the import.
	os.Remove(f.Name())
	if _, err := io.Copy(f, stdin); err != nil {
		f.Close()
		return nil, fmt.Errorf("read the export from stdin: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
