package runner

import (
	"fmt"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// CheckResume refuses to resume run with a study whose files changed since
// the run started: the study itself or any file of its extends chain (the
// manifest's sources and their sha256; a run made before sources were
// recorded has the study's sha256 only). It reads nothing but the study, so
// callers run it before anything in the run directory changes.
func CheckResume(run *store.Run, s *study.Study) error {
	refuse := func(path, was, now string) error {
		return exitcode.Usage(fmt.Errorf(
			"%s changed since %s started (sha256 %.12s, now %.12s): resuming would mix two studies; start a new run instead",
			path, run.Dir, was, now))
	}
	srcs := run.Manifest.Sources
	if len(srcs) == 0 {
		if run.Manifest.StudySHA256 != s.SHA256 {
			return refuse(s.Path, run.Manifest.StudySHA256, s.SHA256)
		}
		return nil
	}
	for i, was := range srcs {
		switch {
		case i >= len(s.Sources):
			return refuse(s.Sources[i-1].Path+" (its extends)", was.SHA256, "none")
		case was.SHA256 != s.Sources[i].SHA256 && i == 0:
			return refuse(s.Sources[0].Path, was.SHA256, s.Sources[0].SHA256)
		case was.SHA256 != s.Sources[i].SHA256:
			return refuse(fmt.Sprintf("%s (extended by %s)", s.Sources[i].Path, s.Sources[i-1].Path), was.SHA256, s.Sources[i].SHA256)
		}
	}
	if len(s.Sources) > len(srcs) {
		last := s.Sources[len(srcs)-1]
		return refuse(last.Path+" (its extends)", "none", s.Sources[len(srcs)].SHA256)
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
