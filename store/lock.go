package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// LockName is the lock file of a run directory: its writer holds an advisory
// lock (flock) on it for as long as it writes, and the file names the holder.
const LockName = "writer.lock"

// ErrLocked is returned when another process writes the run directory.
var ErrLocked = errors.New("the run directory is in use")

// RunLock is the writer's lock on a run directory. The kernel releases it
// when the process ends, however it ends.
type RunLock struct {
	f *os.File
}

// LockRun takes the writer's lock of the run directory dir without waiting.
// When another process holds it, the error (ErrLocked, exit status 2) names
// that process's pid and host.
func LockRun(dir string) (*RunLock, error) {
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		return nil, exitcode.Usage(fmt.Errorf("%s is not a run directory: %w", dir, err))
	}
	return lockDir(dir)
}

func lockDir(dir string) (*RunLock, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "another process"
			}
			return nil, exitcode.Usage(fmt.Errorf("%s: %w by %s: wait until it ends (or stop it) before resuming",
				dir, ErrLocked, who))
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	host, _ := os.Hostname()
	info := fmt.Sprintf("casestudy pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(info), 0) // the holder's name is informational; the lock is what counts
	}
	return &RunLock{f: f}, nil
}

// Close releases the lock.
func (l *RunLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
