package report

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/casestudy/casestudy/store"
)

// StudyBaseline is the baseline file a run's study names under
// compare.baseline (docs/study-format.md), for `casestudy compare NEW`: a
// relative path is relative to the study file, as the run recorded it
// (manifest study_path, itself relative to the folder the run started in).
func StudyBaseline(runDir string) (string, error) {
	run, err := store.ReadRun(runDir)
	if err != nil {
		return "", err
	}
	m := &run.Manifest
	if m.CompareBaseline != "" { // resolved when the run started, extends included
		if _, err := os.Stat(m.CompareBaseline); err == nil {
			return m.CompareBaseline, nil
		}
		// not on this machine (a run copied from the one that made it):
		// the study's own text and path below, as for runs made before
	}
	top := parseYAML(m.StudyText)
	cmp := mapValue(top, "compare")
	b := mapValue(cmp, "baseline")
	if (b == nil || b.Value == "") && m.CompareBaseline != "" {
		return "", fmt.Errorf("%s: its study's compare.baseline was %s where the run was made, not on this machine: "+
			"name the baseline file (casestudy compare OLD NEW)", runDir, m.CompareBaseline)
	}
	if b == nil || b.Value == "" {
		return "", fmt.Errorf("%s: its study (%s) sets no compare.baseline: name the old run or baseline file (casestudy compare OLD NEW), "+
			"or set compare.baseline in the study (write the file with casestudy baseline RUN -o FILE)", runDir, m.StudyPath)
	}
	p := b.Value
	if !filepath.IsAbs(p) && m.StudyPath != "" {
		p = filepath.Join(filepath.Dir(m.StudyPath), p)
	}
	return p, nil
}
