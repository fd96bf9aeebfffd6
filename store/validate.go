package store

import (
	"fmt"
	"path/filepath"
)

// knownOutcomes are the outcomes a record may hold.
var knownOutcomes = map[Outcome]bool{OK: true, Failed: true, OOM: true, Timeout: true, Crashed: true,
	Unsupported: true, Skipped: true, Interrupted: true}

// validate refuses run contents no casestudy writes (audit N17): a manifest
// without a schema (null, {}, another JSON file), a plan with one ID twice, a record with an
// unknown outcome, and a trial recorded twice (an interrupted record aside:
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
	for i := range r.Trials {
		t := &r.Trials[i]
		if !knownOutcomes[t.Outcome] {
			return fmt.Errorf("%s: trial %s has the outcome %q, which casestudy does not write", tpath, t.ID, t.Outcome)
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
