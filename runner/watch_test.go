package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/launch"
)

// TestOwnEnd: which ends after the runner's stop are a rank's own (and so
// outrank a peer's failed collective).
func TestOwnEnd(t *testing.T) {
	killed := time.Now()
	for _, tc := range []struct {
		desc     string
		launcher launch.Launcher
		ex       launch.Exit
		own      bool
	}{
		{"SIGABRT is never the runner's", launch.Local{}, launch.Exit{Signal: "SIGABRT", At: killed.Add(time.Minute)}, true},
		{"an exit status is the rank's", launch.Local{}, launch.Exit{Code: 1, At: killed.Add(time.Second)}, true},
		{"SIGTERM after the stop is the runner's", launch.Local{}, launch.Exit{Signal: "SIGTERM", At: killed.Add(time.Millisecond)}, false},
		{"SIGKILL before the runner's SIGKILL", launch.Local{}, launch.Exit{Signal: "SIGKILL", At: killed.Add(time.Second)}, true},
		{"SIGKILL after the grace period", launch.Local{}, launch.Exit{Signal: "SIGKILL", At: killed.Add(6 * time.Second)}, false},
		{"a scheduler's SIGKILL of a peer", verdictLauncher{}, launch.Exit{Signal: "SIGKILL", At: killed.Add(time.Second)}, false},
		{"a scheduler's verdict", verdictLauncher{}, launch.Exit{Signal: "SIGKILL", Outcome: "oom", At: killed.Add(time.Second)}, true},
	} {
		w := &watcher{o: &Options{Launcher: tc.launcher, KillGrace: 5 * time.Second}, killed: killed}
		assert.Equal(t, tc.own, w.ownEnd(tc.ex), tc.desc)
	}
	w := &watcher{o: &Options{Launcher: launch.Local{}, KillGrace: 5 * time.Second}}
	assert.True(t, w.ownEnd(launch.Exit{Signal: "SIGTERM"}), "before any stop every end is the rank's own")
}
