package store

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// TestLockSurvivesUnlinkingItsFile (audit N9, C-4): deleting writer.lock
// while a writer holds the run does not let a second writer in: the lock is
// on the run directory's inode too, which stays.
func TestLockSurvivesUnlinkingItsFile(t *testing.T) {
	w := newWriter(t) // holds the lock
	require.NoError(t, os.Remove(filepath.Join(w.Dir, LockName)))
	_, err := LockRun(w.Dir)
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, w.Close())
	l, err := LockRun(w.Dir)
	require.NoError(t, err, "free once the writer is done")
	require.NoError(t, l.Close())
}

// TestLockOfAnUnwritableRunIsEnvironment (audit N19, P-16/S-2): a run
// directory on read-only storage, or one this user may not write, cannot be
// locked: exit status 3 (the environment), not 1. Root ignores permission
// bits, so this uses a read-only bind mount (root) or a read-only folder
// (others).
func TestLockOfAnUnwritableRunIsEnvironment(t *testing.T) {
	w := newWriter(t)
	require.NoError(t, w.WriteManifest(&Manifest{Study: "s"}))
	require.NoError(t, w.Close())
	require.NoError(t, os.Remove(filepath.Join(w.Dir, LockName)))
	if os.Geteuid() == 0 {
		if out, err := exec.Command("mount", "--bind", "-o", "ro", w.Dir, w.Dir).CombinedOutput(); err != nil {
			t.Skipf("cannot bind-mount read-only here: %v %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", w.Dir).Run() })
		if err := os.WriteFile(filepath.Join(w.Dir, "probe"), nil, 0o644); err == nil {
			t.Skip("the read-only bind mount is writable here")
		}
	} else {
		require.NoError(t, os.Chmod(w.Dir, 0o555))
		t.Cleanup(func() { _ = os.Chmod(w.Dir, 0o755) })
	}
	_, err := LockRun(w.Dir)
	require.Error(t, err)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err), err.Error())
}
