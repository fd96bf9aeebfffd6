package store

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// holdLock takes the run directory's flock through a descriptor of its own
// (as a child forked by the writer holds it) and names holder in the file.
func holdLock(t *testing.T, dir, holder string) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	require.NoError(t, os.WriteFile(filepath.Join(dir, LockName), []byte(holder), 0o644))
	t.Cleanup(func() { f.Close() })
	return f
}

// endedPid is the pid of a process of this host that has ended and been reaped.
func endedPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// TestLockOfAnEndedHolderFalls: a writer killed while forking leaves its
// lock with the child until the child executes; a resume at that moment
// waits for the lock to fall instead of refusing (the CI failure of
// runner's TestTwoResumesAtOnce).
func TestLockOfAnEndedHolderFalls(t *testing.T) {
	w := newWriter(t)
	require.NoError(t, w.Close())
	host, _ := os.Hostname()
	held := holdLock(t, w.Dir, fmt.Sprintf("casestudy pid %d on %s since 2026-12-03T00:00:00Z\n", endedPid(t), host))
	go func() { time.Sleep(150 * time.Millisecond); held.Close() }()
	start := time.Now()
	w2, _, err := OpenExisting(w.Dir)
	require.NoError(t, err, "the lock fell once the ended holder's child let go")
	require.NoError(t, w2.Close())
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "it waited for the lock")
}

// TestLockOfAnEndedHolderThatStaysHeld: when a process the ended holder
// started keeps the lock past the grace, the refusal says the holder ended
// and something it started holds the lock.
func TestLockOfAnEndedHolderThatStaysHeld(t *testing.T) {
	defer func(g time.Duration) { holderGrace = g }(holderGrace)
	holderGrace = 100 * time.Millisecond
	w := newWriter(t)
	require.NoError(t, w.Close())
	host, _ := os.Hostname()
	pid := endedPid(t)
	holdLock(t, w.Dir, fmt.Sprintf("casestudy pid %d on %s since 2026-12-03T00:00:00Z\n", pid, host))
	_, _, err := OpenExisting(w.Dir)
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), fmt.Sprintf("pid %d on %s", pid, host))
	assert.Contains(t, err.Error(), "which has ended; a process it started still holds the lock")
}

// TestLockOfALiveOrRemoteHolderIsRefusedAtOnce: a running holder on this
// host, or any holder on another host, is refused without waiting.
func TestLockOfALiveOrRemoteHolderIsRefusedAtOnce(t *testing.T) {
	host, _ := os.Hostname()
	for _, holder := range []string{
		fmt.Sprintf("casestudy pid %d on %s since 2026-12-03T00:00:00Z\n", os.Getpid(), host),
		fmt.Sprintf("casestudy pid %d on %s-elsewhere since 2026-12-03T00:00:00Z\n", endedPid(t), host),
		"",
	} {
		w := newWriter(t)
		require.NoError(t, w.Close())
		holdLock(t, w.Dir, holder)
		start := time.Now()
		_, _, err := OpenExisting(w.Dir)
		require.ErrorIs(t, err, ErrLocked, holder)
		assert.Less(t, time.Since(start), holderGrace/2, "refused at once: %q", holder)
		assert.NotContains(t, err.Error(), "which has ended", holder)
	}
}

// TestProbeWriter: a run whose writer holds LockRun's lock probes live, with
// the holder's line; once the lock is released (as the kernel releases it
// when the writer dies, kill -9 too), nobody; the probe takes no lock that
// outlives it (a writer can lock after it).
func TestProbeWriter(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("{}"), 0o644))
	l, err := LockRun(dir)
	require.NoError(t, err)
	state, holder := ProbeWriter(dir)
	assert.Equal(t, WriterLive, state)
	assert.Contains(t, holder, fmt.Sprintf("casestudy pid %d on ", os.Getpid()))
	require.NoError(t, l.Close())
	state, holder = ProbeWriter(dir)
	assert.Equal(t, WriterNone, state)
	assert.Empty(t, holder)
	l, err = LockRun(dir)
	require.NoError(t, err, "the probe left no lock behind")
	require.NoError(t, l.Close())
	state, _ = ProbeWriter(filepath.Join(dir, "no-such-run"))
	assert.Equal(t, WriterUnknown, state)
}
