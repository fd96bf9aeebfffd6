package runner

import (
	"fmt"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// CheckResume refuses to resume run with a study whose file changed since the
// run started (its sha256 differs from the manifest's).
func CheckResume(run *store.Run, s *study.Study) error {
	if run.Manifest.StudySHA256 != s.SHA256 {
		return exitcode.Usage(fmt.Errorf(
			"%s changed since %s started (sha256 %.12s, now %.12s): resuming would mix two studies; start a new run instead",
			s.Path, run.Dir, run.Manifest.StudySHA256, s.SHA256))
	}
	return nil
}

// Committed returns the records a run directory already holds, by trial ID
// (interrupted ones are not among them: OpenExisting dropped them).
func Committed(run *store.Run) map[string]*store.TrialRecord {
	recs := map[string]*store.TrialRecord{}
	for i := range run.Trials {
		t := &run.Trials[i]
		if t.Outcome == store.Interrupted {
			continue
		}
		recs[t.ID] = t
	}
	return recs
}
