package store

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// TestOutputRefusesTheRunsOwnFiles (audit N6, M-4): an output path that is a
// data file of a run directory (directly, through a symlink, or in its logs)
// is refused with exit status 2 and the file is untouched; the reports of a
// run directory may be rewritten.
func TestOutputRefusesTheRunsOwnFiles(t *testing.T) {
	w := newWriter(t)
	require.NoError(t, w.WriteManifest(&Manifest{Study: "s"}))
	require.NoError(t, w.Append(&TrialRecord{ID: "t1", Outcome: OK}))
	require.NoError(t, w.WriteFile("logs/t1/rank0.log", []byte("log\n")))
	before, err := os.ReadFile(filepath.Join(w.Dir, "trials.jsonl"))
	require.NoError(t, err)
	link := filepath.Join(t.TempDir(), "out.json")
	require.NoError(t, os.Symlink(filepath.Join(w.Dir, "trials.jsonl"), link))
	for _, p := range []string{
		filepath.Join(w.Dir, "manifest.json"), filepath.Join(w.Dir, "trials.jsonl"), filepath.Join(w.Dir, LockName),
		filepath.Join(w.Dir, "logs", "t1", "rank0.log"), link,
		filepath.Join(w.Dir, ".", "sub", "..", "trials.jsonl"),
	} {
		err := WriteFileAtomic(p, []byte(`{"schema":2}`))
		require.Error(t, err, p)
		assert.Equal(t, exitcode.Input, exitcode.Of(err), err.Error())
		assert.Contains(t, err.Error(), "refusing to overwrite")
	}
	after, err := os.ReadFile(filepath.Join(w.Dir, "trials.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, before, after)
	_, err = ReadRun(w.Dir)
	require.NoError(t, err, "the run still reads")

	require.NoError(t, WriteFileAtomic(filepath.Join(w.Dir, "summary.json"), []byte("{}")), "reports may be rewritten")
	require.NoError(t, WriteFileAtomic(filepath.Join(t.TempDir(), "trials.jsonl"), []byte("{}")), "not a run directory")
}

// TestConcurrentAtomicWritesNeverCollide (audit N10, C-1/C-2): writers of one
// file at once each use their own temporary file, so every write succeeds and
// a reader only ever sees one whole version.
func TestConcurrentAtomicWritesNeverCollide(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "summary.json")
	bodies := [][]byte{[]byte(`{"a":"` + string(make([]byte, 0)) + `aaaa"}`), []byte(`{"b":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}`)}
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	stop := make(chan struct{})
	var readerWG sync.WaitGroup
	readerWG.Add(1)
	go func() {
		defer readerWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if b, err := os.ReadFile(path); err == nil && string(b) != string(bodies[0]) && string(b) != string(bodies[1]) {
				errs <- &os.PathError{Op: "read", Path: path, Err: os.ErrInvalid}
				return
			}
		}
	}()
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for k := 0; k < 25; k++ {
				if err := WriteFileAtomic(path, bodies[(i+k)%2]); err != nil {
					errs <- err
				}
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	readerWG.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	assert.Empty(t, left)
}

// TestCheckOutputFileRefusesRunReports (export, compare, baseline -o): a
// folder, a run's data and the files report and predict write into a run
// directory are refused with exit status 2 naming the flag, the file
// untouched; the same names outside a run directory, new files and standard
// output are fine.
func TestCheckOutputFileRefusesRunReports(t *testing.T) {
	w := newWriter(t)
	require.NoError(t, w.WriteManifest(&Manifest{Study: "s", RunID: "r1"}))
	link := filepath.Join(t.TempDir(), "out.md")
	require.NoError(t, os.Symlink(filepath.Join(w.Dir, "report.md"), link))
	for _, name := range []string{"summary.json", "report.md", "report.html", "confirm.yaml", "predicted.json", "predicted.md", "predicted.svg"} {
		require.NoError(t, os.WriteFile(filepath.Join(w.Dir, name), []byte("mine"), 0o644))
	}
	for _, p := range []string{
		filepath.Join(w.Dir, "summary.json"), filepath.Join(w.Dir, "report.md"), filepath.Join(w.Dir, "report.html"),
		filepath.Join(w.Dir, "confirm.yaml"), filepath.Join(w.Dir, "predicted.json"), filepath.Join(w.Dir, "predicted.md"),
		filepath.Join(w.Dir, "predicted.svg"), link, filepath.Join(w.Dir, "manifest.json"), filepath.Join(w.Dir, "trials.jsonl"),
	} {
		err := CheckOutputFile("--output (-o)", p)
		require.Error(t, err, p)
		assert.Equal(t, exitcode.Input, exitcode.Of(err), err.Error())
		assert.Contains(t, err.Error(), "--output (-o)")
		assert.Contains(t, err.Error(), "write the output elsewhere")
	}
	for _, name := range []string{"summary.json", "report.md", "predicted.json"} {
		b, err := os.ReadFile(filepath.Join(w.Dir, name))
		require.NoError(t, err)
		assert.Equal(t, "mine", string(b))
	}

	dir := t.TempDir()
	err := CheckOutputFile("--output (-o)", dir)
	require.Error(t, err)
	assert.Equal(t, exitcode.Input, exitcode.Of(err))
	assert.Contains(t, err.Error(), "--output (-o) "+dir+" is a folder: give the path of a file")

	for _, p := range []string{"", "-", filepath.Join(dir, "summary.json"), filepath.Join(dir, "new.csv"), filepath.Join(w.Dir, "export.csv")} {
		assert.NoError(t, CheckOutputFile("--output (-o)", p), p)
	}
}

// TestCheckOutputDir (report and predict --out): a file is refused, and so
// is another run's directory; the run's own directory (or a copy with its
// run ID), a plain folder and a new one are fine.
func TestCheckOutputDir(t *testing.T) {
	w := newWriter(t)
	require.NoError(t, w.WriteManifest(&Manifest{Study: "s", RunID: "run-a"}))
	run, err := ReadRun(w.Dir)
	require.NoError(t, err)
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "manifest.json"), []byte(`{"schema":2,"run_id":"run-b"}`), 0o644))
	copyOf := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(copyOf, "manifest.json"), []byte(`{"schema":2,"run_id":"run-a"}`), 0o644))
	onlyTrials := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(onlyTrials, "trials.jsonl"), nil, 0o644))
	file := filepath.Join(t.TempDir(), "afile")
	require.NoError(t, os.WriteFile(file, nil, 0o644))

	for p, want := range map[string]string{
		other:      "--out " + other + " is the directory of the run run-b: refusing to write files about the run run-a",
		onlyTrials: "is the directory of another run",
		file:       "--out " + file + " is a file, not a folder",
	} {
		_, err := CheckOutputDir("--out", p, run)
		require.Error(t, err, p)
		assert.Equal(t, exitcode.Input, exitcode.Of(err), err.Error())
		assert.Contains(t, err.Error(), want)
	}
	for p, own := range map[string]bool{
		w.Dir: true, filepath.Join(w.Dir, "."): true, copyOf: true,
		t.TempDir(): false, filepath.Join(t.TempDir(), "new"): false,
	} {
		got, err := CheckOutputDir("--out", p, run)
		require.NoError(t, err, p)
		assert.Equal(t, own, got, p)
	}
}
