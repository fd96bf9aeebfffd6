package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// writeRecordedSources writes the study the manifest recorded into tmp for
// re-reading: its text as name, and every file of its extends chain
// (manifest.sources) where the study's extends finds it, so that a study
// with extends re-reads from any folder (audit N12). It returns the study's
// path. Sources recorded with paths that do not place them under tmp are
// left out (the study then fails to resolve them, as before).
func writeRecordedSources(tmp, name string, m *store.Manifest) (string, error) {
	srcs := m.Sources
	if len(srcs) == 0 {
		path := filepath.Join(tmp, name)
		return path, os.WriteFile(path, []byte(m.StudyText), 0o600)
	}
	// Place the study deep enough that every source's path relative to it
	// stays under tmp.
	base := filepath.Dir(srcs[0].Path)
	depth := 0
	rels := make([]string, len(srcs))
	for i, s := range srcs {
		rel, err := filepath.Rel(base, s.Path)
		if err != nil {
			rel = ""
		}
		rels[i] = rel
		up := 0
		for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
			if part == ".." {
				up++
			}
		}
		depth = max(depth, up)
	}
	studyDir := tmp
	for i := 0; i < depth; i++ {
		studyDir = filepath.Join(studyDir, fmt.Sprintf("d%d", i))
	}
	path := filepath.Join(studyDir, name)
	for i, s := range srcs {
		p := path
		text := s.Text
		if i > 0 {
			if rels[i] == "" {
				continue
			}
			p = filepath.Join(studyDir, rels[i])
		} else if text == "" {
			text = m.StudyText
		}
		if rel, err := filepath.Rel(tmp, p); err != nil || !filepath.IsLocal(rel) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			return "", err
		}
	}
	return path, nil
}
