// Package version reports the casestudy version and the git commit it was built from.
package version

import (
	"fmt"
	"runtime/debug"
)

// Version is set at link time (-ldflags "-X .../internal/version.Version=v0.1.0").
var Version = "0.1.0-dev"

// Commit returns the VCS revision recorded by the Go toolchain ("unknown" if none),
// with "+dirty" when the tree had local changes.
func Commit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

// String is "VERSION (COMMIT)".
func String() string { return fmt.Sprintf("%s (%s)", Version, Commit()) }
