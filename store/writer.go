package store

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// Writer owns one run directory: it writes manifest.json atomically, appends
// committed trial records to trials.jsonl (one write and one fsync each) and
// creates the per-rank log files. Every path goes through an os.Root, so a
// name can never escape the run directory.
type Writer struct {
	Dir  string
	root *os.Root

	mu     sync.Mutex
	trials *os.File
	size   int64    // bytes of trials.jsonl that are committed
	lock   *RunLock // the run's writer lock, released by Close
	closed bool
}

// SafeName maps a study or trial name to [a-z0-9._-]: other characters become
// '-', and a name that would still not be a plain local file name ("", ".",
// "..") becomes "unnamed".
func SafeName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), ".")
	if s == "" || !filepath.IsLocal(s) {
		return "unnamed"
	}
	return s
}

// NewRunID is the run directory's name: UTC time and a short random id.
func NewRunID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// RunDir is where a run lives: outRoot/<SafeName(study)>/<runID>.
func RunDir(outRoot, studyName, runID string) string {
	return filepath.Join(outRoot, SafeName(studyName), runID)
}

// Create makes the run directory outRoot/<study>/<runID>/ with its manifest
// and an empty trials.jsonl, and returns its writer, which holds the run's
// lock. The directory is built under a hidden temporary name and renamed into
// place when complete, so a run directory without a manifest never exists;
// on failure (a full disk) nothing is left behind. The study name is made
// safe with SafeName; runID must be a plain file name (NewRunID). Write
// failures carry exit status 3.
func Create(outRoot, studyName, runID string, m *Manifest) (w *Writer, err error) {
	if !filepath.IsLocal(runID) || strings.ContainsAny(runID, `/\`) || SafeName(runID) != strings.ToLower(runID) {
		return nil, fmt.Errorf("run id %q is not a safe directory name", runID)
	}
	dir := RunDir(outRoot, studyName, runID)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, environment(fmt.Errorf("creating the results folder: %w", err))
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("creating the run directory: %s exists already", dir)
	}
	tmp := filepath.Join(parent, "."+runID+".new")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, environment(fmt.Errorf("creating the run directory: %w", err))
	}
	var lock *RunLock
	defer func() {
		if err != nil {
			if w != nil {
				w.Close()
			}
			lock.Close()
			_ = os.RemoveAll(tmp)
			w = nil
		}
	}()
	if lock, err = lockDir(tmp); err != nil {
		return nil, environment(err)
	}
	if w, err = open(tmp, lock); err != nil {
		return nil, environment(err)
	}
	if err = w.WriteManifest(m); err != nil {
		return nil, err
	}
	if err = w.trials.Sync(); err == nil {
		err = renameNoReplace(tmp, dir)
	}
	if err == nil {
		err = syncPath(parent)
	}
	if err != nil {
		return nil, environment(fmt.Errorf("creating the run directory %s: %w", dir, err))
	}
	w.Dir = dir // the open files and the root follow the directory's rename
	return w, nil
}

// renameNoReplace renames the directory from to to, failing when to exists
// (rename(2) alone would replace an empty directory).
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) { // a filesystem without the flag
		if _, statErr := os.Lstat(to); statErr == nil {
			return fmt.Errorf("%s exists already", to)
		}
		err = os.Rename(from, to)
	}
	return err
}

func syncPath(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// environment marks a failure to write as the environment's (exit status 3:
// a full or read-only disk), keeping the error's own code when it has one.
func environment(err error) error {
	if err == nil || exitcode.Of(err) != exitcode.Failure {
		return err
	}
	return exitcode.With(exitcode.Environment, err)
}

// OpenExisting reopens a run directory for --resume: it takes the run's lock,
// reads it and reopens it for appending (Reopen). Commands that must check
// the run before anything in it changes call LockRun, ReadRun and Reopen
// themselves.
func OpenExisting(dir string) (*Writer, *Run, error) {
	lock, err := LockRun(dir)
	if err != nil {
		return nil, nil, err
	}
	run, err := ReadRun(dir)
	if err != nil {
		lock.Close()
		return nil, nil, err
	}
	w, err := Reopen(run, lock)
	if err != nil {
		lock.Close()
		return nil, nil, err
	}
	return w, run, nil
}

// Reopen makes the writer of run, read under lock (the writer keeps the lock
// and releases it on Close). trials.jsonl is appended to, not rewritten: a
// torn last line (the runner was killed mid-append) is cut off, and only when
// records of interrupted trials must go (they will run again, and every trial
// keeps at most one line) is the file rewritten, after checking that the
// device has room for it. run.Trials loses the interrupted records.
func Reopen(run *Run, lock *RunLock) (*Writer, error) {
	w, err := open(run.Dir, lock)
	if err != nil {
		return nil, environment(err)
	}
	kept := make([]TrialRecord, 0, len(run.Trials))
	for _, t := range run.Trials {
		if t.Outcome != Interrupted {
			kept = append(kept, t)
		}
	}
	if len(kept) < len(run.Trials) {
		err = w.rewriteTrials(kept)
	} else {
		err = w.cutTornLine()
	}
	if err != nil {
		w.lock = nil // the caller still owns the lock
		w.Close()
		return nil, environment(err)
	}
	run.Trials = kept
	return w, nil
}

func open(dir string, lock *RunLock) (*Writer, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	w := &Writer{Dir: dir, root: root, lock: lock}
	f, err := root.OpenFile("trials.jsonl", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		root.Close()
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		root.Close()
		return nil, err
	}
	w.trials, w.size = f, st.Size()
	return w, nil
}

// cutTornLine truncates trials.jsonl after its last whole line (a line
// ReadTrials accepted without its newline gets one).
func (w *Writer) cutTornLine() error {
	b, err := w.root.ReadFile("trials.jsonl")
	if err != nil || len(b) == 0 || b[len(b)-1] == '\n' {
		return err
	}
	last := bytes.LastIndexByte(b, '\n') + 1
	var rec TrialRecord
	if json.Unmarshal(b[last:], &rec) == nil { // whole, only its newline is missing
		return w.appendLine(w.trials, []byte("\n"))
	}
	if err := w.trials.Truncate(int64(last)); err != nil {
		return err
	}
	w.size = int64(last)
	return w.trials.Sync()
}

// rewriteTrials replaces trials.jsonl with recs, atomically, once the device
// has room for the new file beside the old one.
func (w *Writer) rewriteTrials(recs []TrialRecord) error {
	var buf []byte
	for i := range recs {
		line, err := json.Marshal(&recs[i])
		if err != nil {
			return err
		}
		buf = append(append(buf, line...), '\n')
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var st unix.Statfs_t
	if err := unix.Statfs(w.Dir, &st); err == nil {
		free := int64(st.Bavail) * int64(st.Bsize)
		if need := int64(len(buf)) + 64<<10; free < need {
			return fmt.Errorf("resuming rewrites %s without its interrupted records and needs %d KiB free; %d KiB are free on its device: free some space, then resume again",
				filepath.Join(w.Dir, "trials.jsonl"), need>>10, free>>10)
		}
	}
	if err := w.writeFileAtomic("trials.jsonl", buf); err != nil {
		return err
	}
	w.trials.Close()
	f, err := w.root.OpenFile("trials.jsonl", os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	w.trials, w.size = f, int64(len(buf))
	return nil
}

// WriteManifest writes manifest.json atomically (temp file, fsync, rename,
// fsync of the directory).
func (w *Writer) WriteManifest(m *Manifest) error {
	m.Schema = SchemaVersion
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return environment(w.writeFileAtomic("manifest.json", append(b, '\n')))
}

// WriteFile writes a whole file under the run directory atomically; name must
// be local (reports use it too).
func (w *Writer) WriteFile(name string, data []byte) error {
	if !filepath.IsLocal(name) {
		return fmt.Errorf("%q is not a path inside the run directory", name)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := filepath.Dir(name); d != "." {
		if err := w.root.MkdirAll(d, 0o755); err != nil {
			return environment(err)
		}
	}
	return environment(w.writeFileAtomic(name, data))
}

func (w *Writer) writeFileAtomic(name string, data []byte) error {
	return writeAtomic(w.root, name, data, filepath.Join(w.Dir, name))
}

// WriteFileAtomic writes data to path whole, the same way the run directory's
// files are written: a temporary file beside it, fsync, rename, fsync of the
// folder. A reader sees the old file or the new one, never half of one. The
// folder must exist. A path that names a data file of a run directory
// (manifest.json, trials.jsonl, ...) is refused with exit status 2.
func WriteFileAtomic(path string, data []byte) error {
	if err := refuseRunFile(path); err != nil {
		return err
	}
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer root.Close()
	return writeAtomic(root, filepath.Base(path), data, path)
}

// writeAtomic writes name under root through a temporary file of a unique
// name beside it (tempName); shown is the path errors name.
func writeAtomic(root *os.Root, name string, data []byte, shown string) (err error) {
	tmp := tempName(name)
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = root.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", shown, err)
	}
	if err = root.Rename(tmp, name); err != nil {
		return err
	}
	return syncDir(root, filepath.Dir(name))
}

func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Append commits one trial record: one write of the whole line, then fsync. A
// failed write (disk full) is cut back so the file keeps only whole lines; the
// error is returned and the record is not committed.
func (w *Writer) Append(rec *TrialRecord) error {
	rec.Schema = SchemaVersion
	capErrors(rec)
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.appendLine(w.trials, line)
}

// syncWriter is what Append needs of a file; tests inject a failing one.
type syncWriter interface {
	io.Writer
	Sync() error
	Truncate(int64) error
}

func (w *Writer) appendLine(f syncWriter, line []byte) error {
	n, err := f.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		if n > 0 {
			_ = f.Truncate(w.size)
		}
		var pe *os.PathError
		if errors.As(err, &pe) { // its path may be the directory's name before Create renamed it (.<run>.new)
			err = pe.Err
		}
		return environment(fmt.Errorf("committing a trial to %s: %w", filepath.Join(w.Dir, "trials.jsonl"), err))
	}
	w.size += int64(n)
	return nil
}

// LogName is the log file of one rank in one repeat, relative to the run
// directory: logs/<trial>/rank<k>.r<rep>.log (rank<k>.preheat.log for the
// pre-heat launch).
func LogName(trialID string, rank, repeat int) string {
	return filepath.Join("logs", SafeName(trialID), fmt.Sprintf("rank%d.%s.log", rank, RepeatTag(repeat)))
}

// TraceName is the profiler's Chrome/Perfetto trace of one rank in one
// repeat, next to its log: logs/<trial>/rank<k>.r<rep>.trace.json.
func TraceName(trialID string, rank, repeat int) string {
	return filepath.Join("logs", SafeName(trialID), fmt.Sprintf("rank%d.%s.trace.json", rank, RepeatTag(repeat)))
}

// PreheatRepeat is the repeat number of the unmeasured pre-heat launch that
// warms a GPU before a run's first measured launch; its logs are
// logs/<trial>/rank<k>.preheat.log and it has no record.
const PreheatRepeat = -1

// RepeatTag names a repeat in file names: r<rep>, or preheat.
func RepeatTag(repeat int) string {
	if repeat == PreheatRepeat {
		return "preheat"
	}
	return fmt.Sprintf("r%d", repeat)
}

// CreateLog creates (truncating) the log file of one rank in one repeat.
func (w *Writer) CreateLog(trialID string, rank, repeat int) (*os.File, error) {
	name := LogName(trialID, rank, repeat)
	if err := w.root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, err
	}
	return w.root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
}

// Close releases the run directory and its lock; closing twice is harmless.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.trials.Close()
	return errors.Join(err, w.root.Close(), w.lock.Close())
}
