package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSafeName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"bert-large-tuning", "bert-large-tuning"},
		{"GPT Smoke", "gpt-smoke"},
		{"../../etc/passwd", "-..-etc-passwd"},
		{"/abs/path", "-abs-path"},
		{"..", "unnamed"},
		{"", "unnamed"},
		{"a/b\\c", "a-b-c"},
	} {
		got := SafeName(tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		assert.True(t, filepath.IsLocal(got), got)
		assert.NotContains(t, got, "/")
	}
}

func newWriter(t *testing.T) *Writer {
	t.Helper()
	w, err := Create(t.TempDir(), "My Study", NewRunID(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), &Manifest{})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return w
}

func TestCreateAppendRead(t *testing.T) {
	w := newWriter(t)
	assert.Equal(t, "my-study", filepath.Base(filepath.Dir(w.Dir)))
	assert.True(t, strings.HasPrefix(filepath.Base(w.Dir), "20260102T030405Z-"))
	require.NoError(t, w.WriteManifest(&Manifest{Study: "My Study", StudySHA256: "abc"}))
	require.NoError(t, w.Append(&TrialRecord{ID: "t1", Outcome: OK}))
	require.NoError(t, w.Append(&TrialRecord{ID: "t2", Outcome: Crashed, Signal: "killed"}))
	run, err := ReadRun(w.Dir)
	require.NoError(t, err)
	assert.Equal(t, SchemaVersion, run.Manifest.Schema)
	require.Len(t, run.Trials, 2)
	assert.Equal(t, "t2", run.Trials[1].ID)
	assert.Equal(t, SchemaVersion, run.Trials[1].Schema)
	left, _ := filepath.Glob(filepath.Join(w.Dir, ".*.tmp"))
	assert.Empty(t, left, "no temp file left behind")
}

func TestOpenExistingDropsTornLineAndInterrupted(t *testing.T) {
	w := newWriter(t)
	require.NoError(t, w.WriteManifest(&Manifest{}))
	require.NoError(t, w.Append(&TrialRecord{ID: "a", Outcome: OK}))
	require.NoError(t, w.Append(&TrialRecord{ID: "b", Outcome: Interrupted}))
	require.NoError(t, w.Append(&TrialRecord{ID: "c", Outcome: Timeout}))
	w.Close()
	f, err := os.OpenFile(filepath.Join(w.Dir, "trials.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"schema":1,"id":"d","outc`) // killed mid-append
	require.NoError(t, err)
	f.Close()

	w2, run, err := OpenExisting(w.Dir)
	require.NoError(t, err)
	defer w2.Close()
	ids := func(r []TrialRecord) (out []string) {
		for _, t := range r {
			out = append(out, t.ID)
		}
		return
	}
	assert.Equal(t, []string{"a", "c"}, ids(run.Trials))
	require.NoError(t, w2.Append(&TrialRecord{ID: "b", Outcome: OK}))
	back, err := ReadTrials(filepath.Join(w.Dir, "trials.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c", "b"}, ids(back))
}

// fullDisk accepts limit bytes, then fails like a full device.
type fullDisk struct {
	buf       []byte
	limit     int
	truncated int64
}

func (f *fullDisk) Write(p []byte) (int, error) {
	room := f.limit - len(f.buf)
	if room >= len(p) {
		f.buf = append(f.buf, p...)
		return len(p), nil
	}
	f.buf = append(f.buf, p[:room]...)
	return room, syscall.ENOSPC
}
func (f *fullDisk) Sync() error { return nil }
func (f *fullDisk) Truncate(n int64) error {
	f.truncated = n
	f.buf = f.buf[:n]
	return nil
}

func TestAppendDiskFullKeepsWholeLines(t *testing.T) {
	w := &Writer{Dir: "/x"}
	d := &fullDisk{limit: 30}
	require.NoError(t, w.appendLine(d, []byte("0123456789\n")))
	err := w.appendLine(d, []byte("0123456789012345678901234\n"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ENOSPC))
	assert.Equal(t, "0123456789\n", string(d.buf), "the torn record is cut back")
	assert.Equal(t, int64(11), w.size)
}

// TestAppendOnTinyTmpfs fills a real 64 KiB tmpfs: the append that does not fit
// fails with ENOSPC and every committed record reads back intact.
func TestAppendOnTinyTmpfs(t *testing.T) {
	// Without root TestAppendDiskFullKeepsWholeLines covers the logic.
	mnt := tinyTmpfs(t, "64k")
	w, err := Create(mnt, "full", "run", &Manifest{})
	require.NoError(t, err)
	defer w.Close()
	big := strings.Repeat("x", 3000)
	committed := 0
	for i := 0; i < 100; i++ {
		if err := w.Append(&TrialRecord{ID: "t", Error: big}); err != nil {
			assert.True(t, errors.Is(err, syscall.ENOSPC), err)
			assert.NotContains(t, err.Error(), ".new", "the path after the rename only (audit note)")
			break
		}
		committed++
	}
	require.Less(t, committed, 100, "the tmpfs never filled")
	back, err := ReadTrials(filepath.Join(w.Dir, "trials.jsonl"))
	require.NoError(t, err)
	assert.Len(t, back, committed)
}

func TestWriteFileRefusesEscapes(t *testing.T) {
	w := newWriter(t)
	for _, name := range []string{"../x", "/etc/x", "a/../../x"} {
		assert.Error(t, w.WriteFile(name, []byte("x")), name)
	}
	// a symlink inside the run dir pointing outside is refused by os.Root
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(w.Dir, "link")))
	assert.Error(t, w.WriteFile("link/x", []byte("x")))
	_, err := os.Stat(filepath.Join(outside, "x"))
	assert.True(t, os.IsNotExist(err))
	require.NoError(t, w.WriteFile("report/index.html", []byte("ok")))
}

func TestCreateLog(t *testing.T) {
	w := newWriter(t)
	f, err := w.CreateLog("../evil", 1, 2)
	require.NoError(t, err)
	f.Close()
	_, err = os.Stat(filepath.Join(w.Dir, "logs", "-evil", "rank1.r2.log"))
	assert.NoError(t, err)
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "job.json")
	require.NoError(t, WriteFileAtomic(p, []byte("old\n")))
	require.NoError(t, WriteFileAtomic(p, []byte("new\n")))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "new\n", string(b))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm()&^0o022)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")

	missing := filepath.Join(dir, "no-such-folder", "x.json")
	err = WriteFileAtomic(missing, []byte("x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)
}
