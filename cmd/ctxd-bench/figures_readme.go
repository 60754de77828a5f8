package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	figuresStart = "<!-- figures:start -->"
	figuresEnd   = "<!-- figures:end -->"
)

// replaceFiguresBlock puts block between the markers of doc, leaving
// everything outside them as it was.
func replaceFiguresBlock(doc, block string) (string, error) {
	ns, ne := strings.Count(doc, figuresStart), strings.Count(doc, figuresEnd)
	switch {
	case ns == 0 || ne == 0:
		return "", fmt.Errorf("no %s ... %s markers: add them, each on its own line, where the table goes", figuresStart, figuresEnd)
	case ns > 1 || ne > 1:
		return "", fmt.Errorf("%s and %s must appear once each (found %d and %d)", figuresStart, figuresEnd, ns, ne)
	}
	i, j := strings.Index(doc, figuresStart), strings.Index(doc, figuresEnd)
	if j < i {
		return "", fmt.Errorf("%s comes before %s", figuresEnd, figuresStart)
	}
	head, tail := doc[:i+len(figuresStart)], doc[j:]
	return head + "\n" + strings.TrimRight(block, "\n") + "\n" + tail, nil
}

// writeFiguresBlock rewrites path with the block between its markers,
// through a temporary file and a rename, so that a failed write leaves the
// README as it was.
func writeFiguresBlock(path, block string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("--readme: %w", err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--readme: %w", err)
	}
	doc, err := replaceFiguresBlock(string(old), block)
	if err != nil {
		return fmt.Errorf("--readme %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".figures-*.tmp")
	if err != nil {
		return fmt.Errorf("--readme: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing to remove
	if _, err := tmp.WriteString(doc); err != nil {
		tmp.Close()
		return fmt.Errorf("--readme: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return fmt.Errorf("--readme: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("--readme: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("--readme: %w", err)
	}
	return nil
}
