package store

import (
	"fmt"
	"path/filepath"
	"strings"
)

// knownOutcomes are the outcomes a record may hold.
var knownOutcomes = map[Outcome]bool{OK: true, Failed: true, OOM: true, Timeout: true, Crashed: true,
	Unsupported: true, Skipped: true, Interrupted: true}

// validate refuses run contents no casestudy writes (audit N17): a manifest
// without a schema (null, {}, another JSON file), a plan with one ID twice, a record with an
// unknown outcome, a trial of a sweep planned whole that its plan does not
// hold, and a trial recorded twice (an interrupted record aside:
// resume replaces it).
func (r *Run) validate() error {
	m := &r.Manifest
	mpath := filepath.Join(r.Dir, "manifest.json")
	if m.Schema == 0 {
		return fmt.Errorf("%s has no schema (null, {} or another file): not a manifest casestudy wrote", mpath)
	}
	planned := make(map[string]bool, len(m.Plan))
	for i, p := range m.Plan {
		if planned[p.ID] {
			return fmt.Errorf("%s: plan entry %d repeats trial id %q: not a manifest casestudy wrote", mpath, i+1, p.ID)
		}
		planned[p.ID] = true
	}
	tpath := filepath.Join(r.Dir, "trials.jsonl")
	done := make(map[string]bool, len(r.Trials))
	// A sweep planned whole (not greedy, whose later rounds are planned
	// from results) records every trial it may run in the plan; the
	// combinations it dropped are "skipped-" records.
	strategy, _ := m.Workload["strategy"].(string)
	whole := strategy == "grid" || strategy == "list" || strategy == "one-at-a-time"
	for i := range r.Trials {
		t := &r.Trials[i]
		if !knownOutcomes[t.Outcome] {
			return fmt.Errorf("%s: trial %s has the outcome %q, which casestudy does not write", tpath, t.ID, t.Outcome)
		}
		if whole && !planned[t.ID] && !strings.HasPrefix(t.ID, "skipped-") {
			return fmt.Errorf("%s: trial %s is not in the plan of %s: a record of another run, or an edited file", tpath, t.ID, mpath)
		}
		if t.Outcome == Interrupted {
			continue
		}
		if done[t.ID] {
			return fmt.Errorf("%s: trial %s is recorded twice: a second writer, or an edited file (move one record out)", tpath, t.ID)
		}
		done[t.ID] = true
	}
	return nil
}
