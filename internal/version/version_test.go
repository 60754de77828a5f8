package version

import (
	"runtime/debug"
	"testing"
)

func TestString(t *testing.T) {
	cases := map[string]struct {
		bi   debug.BuildInfo
		want string
	}{
		"Release": {debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		"Checkout": {debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}},
			"(devel) (commit 0123456789ab)"},
		"Dirty": {debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			"(devel) (commit abc+dirty)"},
		"Empty": {debug.BuildInfo{}, "(devel)"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := fromBuildInfo(&c.bi).String(); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
