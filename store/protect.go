package store

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// runDataFiles are the files of a run directory that hold its results and
// state: no command's output may replace them (audit N6: `baseline RUN -o
// RUN/trials.jsonl` destroyed the run). The reports (report.html, report.md,
// summary.json) are outputs and may be rewritten.
var runDataFiles = map[string]bool{"manifest.json": true, "trials.jsonl": true, LockName: true, "slurm.json": true}

// runGeneratedFiles are the files report and predict write into a run
// directory from its data (report.Formats, report.ConfirmFile,
// predict.JSONFile, MarkdownFile, ChartFile): those commands rewrite them,
// through WriteFileAtomic; no other command's output file (export, compare,
// baseline -o: CheckOutputFile) may replace them.
var runGeneratedFiles = map[string]bool{"summary.json": true, "report.html": true, "report.md": true, "confirm.yaml": true,
	"predicted.json": true, "predicted.md": true, "predicted.svg": true}

// pathsOf are the spellings of path to check against a run directory: as
// given, absolute, and with its symbolic links resolved (the file's, or its
// folder's when the file does not exist yet).
func pathsOf(path string) []string {
	candidates := []string{path}
	if abs, err := filepath.Abs(path); err == nil {
		candidates = append(candidates, abs)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		candidates = append(candidates, real)
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		candidates = append(candidates, filepath.Join(dir, filepath.Base(path)))
	}
	for i, c := range candidates {
		candidates[i] = filepath.Clean(c)
	}
	return candidates
}

// refuseRunFile refuses (exit status 2) an output path that names a data
// file of a run directory, directly or through a symbolic link, or anything
// in a run directory's logs folder.
func refuseRunFile(path string) error {
	for _, c := range pathsOf(path) {
		if runDataFiles[filepath.Base(c)] && isRunDir(filepath.Dir(c)) {
			return exitcode.Usage(fmt.Errorf("%s is %s of the run directory %s: refusing to overwrite the run's own file; write the output elsewhere",
				path, filepath.Base(c), filepath.Dir(c)))
		}
		for d := filepath.Dir(c); d != filepath.Dir(d); d = filepath.Dir(d) {
			if filepath.Base(d) == "logs" && isRunDir(filepath.Dir(d)) {
				return exitcode.Usage(fmt.Errorf("%s is inside the logs of the run directory %s: refusing to overwrite the run's own files; write the output elsewhere",
					path, filepath.Dir(d)))
			}
		}
	}
	return nil
}

// isRunDir says whether dir holds a run (its manifest or trials).
func isRunDir(dir string) bool {
	for _, f := range []string{"manifest.json", "trials.jsonl"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// tempName is a unique temporary name beside name (same folder): concurrent
// writers of one file never share a temporary file (audit N10).
func tempName(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+"."+hex.EncodeToString(b[:])+".tmp")
}

// CheckOutputFile checks the file a command writes its output to (flag
// names it: "--output (-o)"; "" and "-" are standard output) before anything
// is computed or written: a folder, a run directory's data (manifest.json, trials.jsonl, ...) or a file report
// and predict write into a run directory (summary.json, report.html,
// report.md, confirm.yaml, predicted.*) are refused with exit status 2, so
// that export, compare or baseline never replaces a run's results or
// reports with their own output. A folder that cannot be written (missing,
// read-only) is left to the write: the environment's problem, exit status 3.
func CheckOutputFile(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return exitcode.Usage(fmt.Errorf("%s %s is a folder: give the path of a file to write, e.g. %s",
			flag, path, filepath.Join(path, "NAME")))
	}
	if err := refuseRunFile(path); err != nil {
		return exitcode.Usage(fmt.Errorf("%s: %w", flag, err))
	}
	for _, c := range pathsOf(path) {
		if runGeneratedFiles[filepath.Base(c)] && isRunDir(filepath.Dir(c)) {
			return exitcode.Usage(fmt.Errorf("%s %s is %s of the run directory %s, which casestudy report or predict writes: "+
				"refusing to replace it; write the output elsewhere", flag, path, filepath.Base(c), filepath.Dir(c)))
		}
	}
	return nil
}

// CheckOutputDir checks the folder (flag names it: "--out") that a command
// writes files about run into (report, predict): a file there is refused,
// and so is the directory of another run (manifest.json or trials.jsonl, and
// not run's own directory nor a copy with its run ID), whose reports or
// predictions would be replaced by run's or shown as its own. own says
// whether dir is run's own run directory. A folder that does not exist yet
// is fine (the command makes it); one that cannot be made is left to the
// write (the environment's problem, exit status 3).
func CheckOutputDir(flag, dir string, run *Run) (own bool, err error) {
	st, err := os.Stat(dir)
	if err != nil { // a new folder; one that cannot be made is the write's error (exit status 3)
		return false, nil
	}
	if !st.IsDir() {
		return false, exitcode.Usage(fmt.Errorf("%s %s is a file, not a folder: give a folder to write into (a new one is made)", flag, dir))
	}
	if !isRunDir(dir) {
		return false, nil
	}
	if run != nil && run.Dir != "" {
		if rs, err := os.Stat(run.Dir); err == nil && os.SameFile(rs, st) {
			return true, nil
		}
	}
	id := RunIDOf(dir)
	if run != nil && id != "" && id == run.Manifest.RunID {
		return true, nil
	}
	what := "another run"
	if id != "" {
		what = "the run " + id
	}
	return false, exitcode.Usage(fmt.Errorf("%s %s is the directory of %s: refusing to write files about %s into it (they would replace its "+
		"own or be shown as its own); give a folder that holds no run, or omit %s to write into %s", flag, dir, what, runName(run), flag, runDirName(run)))
}

func runName(run *Run) string {
	if run != nil && run.Manifest.RunID != "" {
		return "the run " + run.Manifest.RunID
	}
	return "this run"
}

func runDirName(run *Run) string {
	if run != nil && run.Dir != "" {
		return run.Dir
	}
	return "the run directory"
}

// RunIDOf is the run ID that dir's manifest.json records; "" when dir has no
// readable manifest.
func RunIDOf(dir string) string {
	b, err := ReadRegular(filepath.Join(dir, "manifest.json"), ManifestLimit)
	if err != nil {
		return ""
	}
	var m struct {
		RunID string `json:"run_id"`
	}
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	return m.RunID
}
