package store

import (
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
	size   int64 // bytes of trials.jsonl that are committed
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

// Create makes outRoot/<study>/<runID>/ and returns its writer. The study name
// is made safe with SafeName; runID must be a plain file name (NewRunID).
func Create(outRoot, studyName, runID string) (*Writer, error) {
	if !filepath.IsLocal(runID) || strings.ContainsAny(runID, `/\`) || SafeName(runID) != strings.ToLower(runID) {
		return nil, fmt.Errorf("run id %q is not a safe directory name", runID)
	}
	dir := RunDir(outRoot, studyName, runID)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("creating the results folder: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the run directory: %w", err)
	}
	return open(dir)
}

// OpenExisting reopens a run directory for --resume. A torn last line of
// trials.jsonl (the runner was killed mid-append) is cut off, and records of
// trials that were interrupted are dropped (they will run again), so that every
// trial keeps at most one line.
func OpenExisting(dir string) (*Writer, *Run, error) {
	run, err := ReadRun(dir)
	if err != nil {
		return nil, nil, err
	}
	w, err := open(dir)
	if err != nil {
		return nil, nil, err
	}
	kept := run.Trials[:0]
	for _, t := range run.Trials {
		if t.Outcome != Interrupted {
			kept = append(kept, t)
		}
	}
	run.Trials = kept
	if err := w.rewriteTrials(kept); err != nil {
		w.Close()
		return nil, nil, err
	}
	return w, run, nil
}

func open(dir string) (*Writer, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	w := &Writer{Dir: dir, root: root}
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

// rewriteTrials replaces trials.jsonl with recs, atomically.
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
	return w.writeFileAtomic("manifest.json", append(b, '\n'))
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
			return err
		}
	}
	return w.writeFileAtomic(name, data)
}

func (w *Writer) writeFileAtomic(name string, data []byte) error {
	return writeAtomic(w.root, name, data, filepath.Join(w.Dir, name))
}

// WriteFileAtomic writes data to path whole, the same way the run directory's
// files are written: a temporary file beside it, fsync, rename, fsync of the
// folder. A reader sees the old file or the new one, never half of one. The
// folder must exist.
func WriteFileAtomic(path string, data []byte) error {
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer root.Close()
	return writeAtomic(root, filepath.Base(path), data, path)
}

// writeAtomic writes name under root through name.tmp; shown is the path
// errors name.
func writeAtomic(root *os.Root, name string, data []byte, shown string) (err error) {
	tmp := name + ".tmp"
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
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
		return fmt.Errorf("committing a trial to %s: %w", filepath.Join(w.Dir, "trials.jsonl"), err)
	}
	w.size += int64(n)
	return nil
}

// LogName is the log file of one rank in one repeat, relative to the run
// directory: logs/<trial>/rank<k>.r<rep>.log.
func LogName(trialID string, rank, repeat int) string {
	if repeat == PreheatRepeat {
		return filepath.Join("logs", SafeName(trialID), fmt.Sprintf("rank%d.preheat.log", rank))
	}
	return filepath.Join("logs", SafeName(trialID), fmt.Sprintf("rank%d.r%d.log", rank, repeat))
}

// PreheatRepeat is the repeat number of the unmeasured pre-heat launch that
// warms a GPU before a run's first measured launch; its logs are
// logs/<trial>/rank<k>.preheat.log and it has no record.
const PreheatRepeat = -1

// CreateLog creates (truncating) the log file of one rank in one repeat.
func (w *Writer) CreateLog(trialID string, rank, repeat int) (*os.File, error) {
	name := LogName(trialID, rank, repeat)
	if err := w.root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, err
	}
	return w.root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
}

// Close releases the run directory.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.trials.Close()
	return errors.Join(err, w.root.Close())
}
