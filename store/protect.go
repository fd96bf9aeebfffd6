package store

import (
	"crypto/rand"
	"encoding/hex"
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

// refuseRunFile refuses (exit status 2) an output path that names a data
// file of a run directory, directly or through a symbolic link, or anything
// in a run directory's logs folder.
func refuseRunFile(path string) error {
	candidates := []string{path}
	if abs, err := filepath.Abs(path); err == nil {
		candidates = append(candidates, abs)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		candidates = append(candidates, real)
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		candidates = append(candidates, filepath.Join(dir, filepath.Base(path)))
	}
	for _, c := range candidates {
		c = filepath.Clean(c)
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
