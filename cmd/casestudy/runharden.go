package main

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/casestudy/casestudy/store"
)

// gracefulFromNow makes the running command graceful from this moment (see
// runMain): `run` becomes so once its run directory exists, so that a signal
// while it reads the study (a FIFO, a stalled file system) or loads the
// engine library (a constructor that hangs) ends it at once with 128 + the
// signal's number, as it ends every other command (audit N14), and a signal
// during the sweep records the trial in flight as interrupted.
func gracefulFromNow(ctx context.Context) {
	if b, ok := ctx.Value(gracefulKey{}).(*atomic.Bool); ok {
		b.Store(true)
	}
}

// resumeStudyPath is the study a resume without STUDY reads: the path the
// manifest recorded when it is there from this folder, else the same path
// from the folder the run was started in, as its output root tells
// (results/<study>/<run>: three levels up), so that `cd / && casestudy run
// --resume RUN` finds it (audit D18's residue). CheckResume verifies that it
// is the same study.
func resumeStudyPath(run *store.Run) string {
	p := run.Manifest.StudyPath
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		return p
	}
	if abs, err := filepath.Abs(run.Dir); err == nil {
		if c := filepath.Join(abs, "..", "..", "..", p); isRegular(c) {
			return c
		}
	}
	return p
}

func isRegular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// resumedOut is the --out a resumed run's trial commands carry when the
// resume was not given one: the run's own output root (audit N21).
func resumedOut(runDir string) string {
	abs, err := filepath.Abs(runDir)
	if err != nil {
		return ""
	}
	return filepath.Dir(filepath.Dir(abs))
}
