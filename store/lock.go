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

// LockName is the lock file of a run directory: it names the writer. The
// writer holds an advisory lock (flock) on the run directory itself, an inode
// nobody can unlink while the run exists (audit N9: deleting writer.lock let
// a second writer in), and on this file too, for casestudy versions that
// locked only the file.
const LockName = "writer.lock"

// ErrLocked is returned when another process writes the run directory.
var ErrLocked = errors.New("the run directory is in use")

// RunLock is the writer's lock on a run directory. The kernel releases it
// when the process ends, however it ends.
type RunLock struct {
	d *os.File // the run directory
	f *os.File // its writer.lock
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

// holderGrace is how long a lock whose named holder has ended may take to
// fall: a child the holder was forking when it died keeps the lock's open
// file until it executes its program (which closes it) or dies too.
var holderGrace = 3 * time.Second

func lockDir(dir string) (*RunLock, error) {
	path := filepath.Join(dir, LockName)
	d, err := os.Open(dir)
	if err != nil { // the machine's fault (permissions, a vanished folder): exit status 3
		return nil, exitcode.With(exitcode.Environment, fmt.Errorf("locking %s: %w", dir, err))
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil { // read-only or foreign-owned: exit status 3 (audit N19)
		d.Close()
		return nil, exitcode.With(exitcode.Environment, fmt.Errorf("locking %s: %w (the run directory must be writable to resume it)", dir, err))
	}
	deadline := time.Now().Add(holderGrace)
	for {
		err = flockBoth(d, f)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			d.Close()
			f.Close()
			return nil, exitcode.With(exitcode.Environment, fmt.Errorf("locking %s: %w", path, err))
		}
		holder, _ := os.ReadFile(path)
		who := strings.TrimSpace(string(holder))
		ended := holderEnded(who)
		if ended && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		d.Close()
		f.Close()
		switch {
		case who == "":
			who = "another process"
		case ended:
			who += " (which has ended; a process it started still holds the lock: stop it)"
		}
		return nil, exitcode.Usage(fmt.Errorf("%s: %w by %s: wait until it ends (or stop it) before resuming",
			dir, ErrLocked, who))
	}
	host, _ := os.Hostname()
	info := fmt.Sprintf("casestudy pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(info), 0) // the holder's name is informational; the lock is what counts
	}
	return &RunLock{d: d, f: f}, nil
}

// flockBoth takes the exclusive lock of the directory, then of the file,
// without waiting; it holds neither when it fails.
func flockBoth(d, f *os.File) error {
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = unix.Flock(int(d.Fd()), unix.LOCK_UN)
		return err
	}
	return nil
}

// holderEnded reports whether the lock file's holder line names a process
// of this host that no longer runs (gone or a zombie). A holder on another
// host, or a line it cannot read, counts as running.
func holderEnded(who string) bool {
	var pid int
	var host string
	if _, err := fmt.Sscanf(who, "casestudy pid %d on %s", &pid, &host); err != nil || pid <= 0 {
		return false
	}
	if me, _ := os.Hostname(); host != me {
		return false
	}
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis: "pid (comm) S ...".
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// Close releases the lock.
func (l *RunLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	if derr := l.d.Close(); err == nil {
		err = derr
	}
	l.f, l.d = nil, nil
	return err
}

// WriterState is whether a live process holds a run's writer lock
// (ProbeWriter).
type WriterState int

const (
	WriterUnknown WriterState = iota // the lock could not be tried
	WriterLive                       // a process holds it: the run is running
	WriterNone                       // nobody holds it: the run is not running
)

// ProbeWriter tries the run's writer lock (LockRun: an flock on the
// run directory and on its writer.lock) without taking it for long and
// without writing anything: a shared lock, released at once, fails while a
// writer holds the exclusive one. The kernel releases a writer's lock when
// its process ends, however it ends (kill -9 too). A run being created is
// locked under its temporary name, and a resume that meets this probe's
// moment of holding waits for it (the holder it names has ended). holder is
// writer.lock's line naming the writer, when a writer holds the lock.
func ProbeWriter(dir string) (state WriterState, holder string) {
	state = WriterNone
	for _, p := range []string{dir, filepath.Join(dir, LockName)} {
		// O_NONBLOCK: a FIFO in writer.lock's place does not hang status
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			if p != dir && os.IsNotExist(err) { // a run without the file (copied)
				continue
			}
			return WriterUnknown, ""
		}
		if st, err := f.Stat(); err != nil || !st.IsDir() && !st.Mode().IsRegular() {
			f.Close()
			return WriterUnknown, ""
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		}
		f.Close()
		switch {
		case errors.Is(err, unix.EWOULDBLOCK):
			return WriterLive, lockHolder(dir)
		case err != nil:
			state = WriterUnknown
		}
	}
	return state, ""
}

// lockHolder is the first line of the run's writer.lock (at most 200 bytes):
// "casestudy pid N on HOST since TIME".
func lockHolder(dir string) string {
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	b := make([]byte, 200)
	n, _ := f.Read(b)
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	return strings.TrimSpace(line)
}
