// Package version reports the casestudy version and the git commit it was built from.
package version

import (
	"fmt"
	"runtime/debug"
)

// Version is set at link time (-ldflags "-X .../internal/version.Version=v0.1.0").
var Version = "0.1.0-dev"

// commit is set at link time by the Makefile (-X .../internal/version.commit=SHA);
// it wins over the toolchain's VCS stamp, which some checkouts lack.
var commit = ""

// Commit returns the git revision the binary was built from ("unknown" if none
// was recorded), with "+dirty" when the tree had local changes.
func Commit() string {
	if commit != "" {
		return commit
	}
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
