// Package version says which ctxd is running: the module version and the
// commit it was built from, as the Go toolchain recorded them in the binary
// (go install ...@vX records the version, a build in a git checkout the
// commit). `ctxd --version`, /healthz and the dashboard's footer show it.
package version

import (
	"runtime/debug"
	"strings"
)

// Info is what the build recorded.
type Info struct {
	Version string // the module version, "(devel)" for a build from a checkout
	Commit  string // the VCS revision, "" when none was recorded
	Dirty   bool   // the checkout had uncommitted changes
}

// Get reads the running binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.modified":
			in.Dirty = s.Value == "true"
		}
	}
	return in
}

// String is the one-line form: "v1.2.0 (commit 0123abcd4567)", with
// "+dirty" when the checkout had changes.
func (in Info) String() string {
	var b strings.Builder
	b.WriteString(in.Version)
	if in.Commit != "" {
		b.WriteString(" (commit ")
		b.WriteString(in.Commit[:min(12, len(in.Commit))])
		if in.Dirty {
			b.WriteString("+dirty")
		}
		b.WriteString(")")
	}
	return b.String()
}
