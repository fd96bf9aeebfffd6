package store

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Run is a run directory read back: the manifest and every committed trial.
type Run struct {
	Dir      string
	Manifest Manifest
	Trials   []TrialRecord
}

// ReadRun reads manifest.json and trials.jsonl of dir. A torn last line of
// trials.jsonl (a run killed mid-append) is ignored; any other bad line is an error.
func ReadRun(dir string) (*Run, error) {
	r := &Run{Dir: dir}
	b, err := ReadRegular(filepath.Join(dir, "manifest.json"), ManifestLimit)
	if err != nil {
		return nil, fmt.Errorf("%s is not a run directory: %w", dir, err)
	}
	if err := json.Unmarshal(b, &r.Manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "manifest.json"), err)
	}
	if r.Manifest.Schema > SchemaVersion {
		return nil, fmt.Errorf("%s: schema %d is newer than this casestudy understands (%d): upgrade casestudy",
			dir, r.Manifest.Schema, SchemaVersion)
	}
	r.Trials, err = ReadTrials(filepath.Join(dir, "trials.jsonl"))
	if err != nil {
		return nil, err
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// ReadTrials reads a trials.jsonl file; a missing file is an empty run.
func ReadTrials(path string) ([]TrialRecord, error) {
	f, err := OpenRegular(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []TrialRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), lineLimit)
	var pendingErr error
	line := 0
	for sc.Scan() {
		line++
		if pendingErr != nil { // a bad line that was not the last one
			return nil, pendingErr
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		var t TrialRecord
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			pendingErr = fmt.Errorf("%s:%d: %w", path, line, err)
			continue
		}
		if t.Schema > SchemaVersion {
			return nil, fmt.Errorf("%s:%d: schema %d is newer than this casestudy understands (%d): upgrade casestudy to read this run",
				path, line, t.Schema, SchemaVersion)
		}
		capErrors(&t) // bounded for every reader, whatever wrote the file
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		if err == bufio.ErrTooLong {
			return nil, fmt.Errorf("%s:%d: a line longer than %d MiB: not a record casestudy wrote", path, line+1, lineLimit>>20)
		}
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}

// Unrecorded are the planned trials that have no record in trials.jsonl (the
// run stopped before them; run --resume runs them), in plan order: the
// report's not_run trials, the checklist's and a rehearsal's alike.
func (r *Run) Unrecorded() []PlannedTrial {
	recorded := make(map[string]bool, len(r.Trials))
	for i := range r.Trials {
		recorded[r.Trials[i].ID] = true
	}
	var out []PlannedTrial
	for _, p := range r.Manifest.Plan {
		if !recorded[p.ID] {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}
