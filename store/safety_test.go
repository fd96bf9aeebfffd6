package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/internal/testfs"
)

// tinyTmpfs mounts a tmpfs of size bytes (root only: the tests that need a
// really full device skip elsewhere, the logic has fake-device tests).
func tinyTmpfs(t *testing.T, size string) string {
	t.Helper()
	return testfs.Tmpfs(t, "", "size="+size)
}

// fill writes a file that leaves about keep bytes free on dir's device.
func fill(t *testing.T, dir string, keep int64) {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	free := int64(st.Bavail) * st.Bsize
	if free > keep {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "filler"), make([]byte, free-keep), 0o644))
	}
}

// TestCreateLeavesNoRunDirWithoutManifest: out of space while the manifest
// is written (issue 21, defect 13), Create fails with exit status 3 and
// leaves no run directory, not even an empty one.
func TestCreateLeavesNoRunDirWithoutManifest(t *testing.T) {
	mnt := tinyTmpfs(t, "64k")
	big := &Manifest{Study: "s", StudyText: strings.Repeat("x", 200<<10)}
	_, err := Create(mnt, "s", "run1", big)
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ENOSPC), err)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err))
	entries, err := os.ReadDir(filepath.Join(mnt, "s"))
	require.NoError(t, err)
	assert.Empty(t, entries, "no run directory and no temporary one")

	w, err := Create(mnt, "s", "run2", &Manifest{Study: "s"})
	require.NoError(t, err, "a manifest that fits")
	w.Close()
	_, err = ReadRun(filepath.Join(mnt, "s", "run2"))
	assert.NoError(t, err)
}

// TestCreateRefusesAnExistingRunDir: a run ID is never reused, even for an
// empty directory of that name.
func TestCreateRefusesAnExistingRunDir(t *testing.T) {
	out := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(out, "s", "run1"), 0o755))
	_, err := Create(out, "s", "run1", &Manifest{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exists")
}

// TestSecondWriterIsRefused: a run directory has one writer; a second one
// (a second --resume, issue 21, defect 5) is refused with the holder's pid
// and host, and gets in once the first closed.
func TestSecondWriterIsRefused(t *testing.T) {
	w := newWriter(t)
	_, _, err := OpenExisting(w.Dir)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrLocked)
	host, _ := os.Hostname()
	assert.Contains(t, err.Error(), fmt.Sprintf("pid %d on %s", os.Getpid(), host))
	assert.Equal(t, exitcode.Input, exitcode.Of(err))
	require.NoError(t, w.Close())
	w2, _, err := OpenExisting(w.Dir)
	require.NoError(t, err)
	require.NoError(t, w2.Close())
}

// TestAppendOnFullDiskIsEnvironment: a commit that does not fit fails with
// exit status 3 (README) and keeps every committed line.
func TestAppendOnFullDiskIsEnvironment(t *testing.T) {
	mnt := tinyTmpfs(t, "256k")
	w, err := Create(mnt, "s", "run", &Manifest{Study: "s"})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Append(&TrialRecord{ID: "a", Outcome: OK}))
	fill(t, mnt, 1024)
	err = w.Append(&TrialRecord{ID: "b", Error: strings.Repeat("x", 64<<10)})
	require.Error(t, err)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err))
	back, err := ReadTrials(filepath.Join(w.Dir, "trials.jsonl"))
	require.NoError(t, err)
	assert.Len(t, back, 1)
}

// TestResumeOnFullDisk: resuming appends to trials.jsonl; it rewrites the
// file only to drop interrupted records, and then checks the free space
// first: on a full device it refuses with exit status 3 and leaves the file
// as it was (issue 21, defect 12).
func TestResumeOnFullDisk(t *testing.T) {
	mnt := tinyTmpfs(t, "512k")
	w, err := Create(mnt, "s", "run", &Manifest{Study: "s"})
	require.NoError(t, err)
	for i := 0; i < 20; i++ {
		require.NoError(t, w.Append(&TrialRecord{ID: fmt.Sprint("t", i), Outcome: OK, Error: strings.Repeat("x", 4<<10)}))
	}
	require.NoError(t, w.Close())
	trials := filepath.Join(w.Dir, "trials.jsonl")
	fill(t, mnt, 16<<10)

	// nothing interrupted: no rewrite, resuming works on a full disk
	w2, run, err := OpenExisting(w.Dir)
	require.NoError(t, err)
	assert.Len(t, run.Trials, 20)
	require.NoError(t, w2.Append(&TrialRecord{ID: "i", Outcome: Interrupted}))
	require.NoError(t, w2.Close())
	before, err := os.ReadFile(trials)
	require.NoError(t, err)

	// an interrupted record to drop: the rewrite needs the file's size free
	_, _, err = OpenExisting(w.Dir)
	require.Error(t, err)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err), err)
	assert.Contains(t, err.Error(), "free")
	after, err := os.ReadFile(trials)
	require.NoError(t, err)
	assert.Equal(t, before, after, "trials.jsonl untouched")

	require.NoError(t, os.Remove(filepath.Join(mnt, "filler")))
	w3, run, err := OpenExisting(w.Dir)
	require.NoError(t, err)
	defer w3.Close()
	assert.Len(t, run.Trials, 20, "the interrupted record is dropped once there is room")
}
