package main

import (
	"os"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// barProgress draws long admin work as a progress bar on stderr, one bar a
// stage. It is used only when stderr is a terminal: in a pipe or a log a bar
// is noise.
type barProgress struct{ bar *progressbar.ProgressBar }

func newProgress() memory.Progress {
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	return &barProgress{}
}

func (p *barProgress) Begin(what string, total int) {
	p.End()
	if total <= 0 {
		total = -1 // a spinner: the size is not known beforehand
	}
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msg"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	)
}

func (p *barProgress) Add(n int) {
	if p.bar != nil {
		_ = p.bar.Add(n)
	}
}

func (p *barProgress) End() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
}
