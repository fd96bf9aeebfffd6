// Package testfs mounts small real filesystems for tests of what happens
// when storage runs out (bytes or inodes): the store's writer and the
// runner's sweep. It needs root; without it, or where mount is refused (a
// container without CAP_SYS_ADMIN), the test is skipped, and the logic is
// covered by fake-device tests elsewhere.
package testfs

import (
	"os"
	"os/exec"
	"testing"
)

// Tmpfs mounts a tmpfs with the mount options opts (e.g. "size=64k",
// "size=64m,nr_inodes=1000") at dir, or at a fresh temporary folder when dir
// is "", and unmounts it (lazily) when the test ends. It returns the mount
// point.
func Tmpfs(t testing.TB, dir, opts string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testfs: %v", err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// Remount changes a mounted tmpfs's options (e.g. "nr_inodes=5"); the
// returned error carries mount's output.
func Remount(dir, opts string) error {
	if out, err := exec.Command("mount", "-o", "remount,"+opts, dir).CombinedOutput(); err != nil {
		return &remountError{err: err, out: string(out)}
	}
	return nil
}

type remountError struct {
	err error
	out string
}

func (e *remountError) Error() string { return e.err.Error() + " " + e.out }
func (e *remountError) Unwrap() error { return e.err }
