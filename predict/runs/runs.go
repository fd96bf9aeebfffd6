// Package runs connects the predictor to run directories: the one-rank
// run's trials as inputs, a measured multi-rank run as the check, and the
// predicted trials written beside the run's results as files of their own
// (predicted.json, predicted.md) that no verdict, baseline, compare or
// history reads (docs/predict.md).
package runs

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/store"
)

// The files a prediction writes into a run directory.
const (
	JSONFile     = predict.JSONFile
	MarkdownFile = predict.MarkdownFile
	ChartFile    = predict.ChartFile
)

// Inputs are a one-rank run's ok trials with their ok launches (rank 0's
// measured steps), in the run's order.
func Inputs(run *store.Run) ([]predict.TrialInput, error) {
	var out []predict.TrialInput
	for _, t := range run.Trials {
		if t.Outcome != store.OK {
			continue
		}
		in := predict.TrialInput{ID: t.ID, Knobs: t.Knobs}
		for _, rp := range t.Repeats {
			if rp.Outcome != store.OK || len(rp.Ranks) == 0 {
				continue
			}
			if len(rp.Ranks) != 1 {
				return nil, fmt.Errorf("%s: trial %s ran %d ranks: predictions start from a one-rank run", run.Dir, t.ID, len(rp.Ranks))
			}
			in.Launches = append(in.Launches, rp.Ranks[0].Steps)
		}
		if len(in.Launches) > 0 {
			out = append(out, in)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no trial with a finished launch to predict from", run.Dir)
	}
	return out, nil
}

// Key names a trial by its knob values: the same trial in a one-rank and an
// N-rank run of a study (its ID may differ with the workload).
func Key(values map[string]string) string {
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names)
	return knobs.Join(values, names, " ")
}

// Measured is a run's step time per trial key: each launch's slowest rank's
// mean step time (the throughput's definition, docs/architecture.md), the
// median over its ok launches. Several runs of the same study (launches
// interleaved with the one-rank run's, scripts/predict-validate.sh) pool
// their launches.
func Measured(rs ...*store.Run) map[string]float64 {
	out := map[string]float64{}
	for k, v := range MeasuredLaunches(rs...) {
		out[k] = predict.Median(v)
	}
	return out
}

// Merge pools the inputs of several one-rank runs of the same study by trial
// (its knob values): each trial's launches from every run, in the first
// run's trial order.
func Merge(sets ...[]predict.TrialInput) []predict.TrialInput {
	var out []predict.TrialInput
	at := map[string]int{}
	for _, set := range sets {
		for _, in := range set {
			k := Key(in.Knobs)
			if i, ok := at[k]; ok {
				out[i].Launches = append(out[i].Launches, in.Launches...)
				continue
			}
			at[k] = len(out)
			in.Launches = append([][]engine.StepMetrics(nil), in.Launches...)
			out = append(out, in)
		}
	}
	return out
}

// ComputeScale is what CPU ranks lose to sharing cores: max(1, ranks x the
// threads of each rank / cores); 1 on GPUs. threads is the one-rank run's
// workload.threads (0: the runner gave the one rank every core); `run
// --predict N` on CPU sets it to the threads each of N ranks gets (cores/N),
// so that the one-rank input computes as one rank of the N-rank run does.
// It also returns the threads and cores it used (0, 0 on GPUs).
func ComputeScale(run *store.Run, ranks, cores int) (scale float64, threads, usedCores int) {
	if device(run) != "cpu" {
		return 1, 0, 0
	}
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	if v, ok := run.Manifest.Workload["threads"].(float64); ok {
		threads = int(v)
	}
	if threads <= 0 {
		threads = cores
	}
	return max(1, float64(ranks*threads)/float64(cores)), threads, cores
}

func device(run *store.Run) string {
	if v, ok := run.Manifest.Workload["device_resolved"].(string); ok && v != "" {
		return v
	}
	v, _ := run.Manifest.Workload["device"].(string)
	return v
}

// Changed is a prediction's knobs that differ from the run's baseline, as
// the report names trials.
func Changed(run *store.Run) func(predict.Prediction) string {
	byID := map[string][]string{}
	for _, t := range run.Trials {
		byID[t.ID] = t.Changed
	}
	return func(p predict.Prediction) string {
		c := byID[p.ID]
		if len(c) == 0 {
			return "(baseline)"
		}
		return knobs.Join(p.Knobs, c, " ")
	}
}

// File is predicted.json: the predictions with the ID of the run they were
// predicted from (its manifest's run_id; the first RUN_DIR's when several
// pool their launches), so that a report reads them only beside that run
// (report.LoadPredicted). Files written before RunID was recorded lack it.
type File struct {
	RunID string `json:"run_id,omitempty"`
	predict.File
}

// NewFile is the predicted.json of preds, predicted from run.
func NewFile(run *store.Run, preds []predict.Prediction, v *predict.Validation) File {
	f := File{File: predict.File{Note: predict.Note, Model: preds[0].Model, Ranks: preds[0].Ranks, Predictions: preds, Validation: v}}
	if run != nil {
		f.RunID = run.Manifest.RunID
	}
	return f
}

// Write writes predicted.json, predicted.md and its chart predicted.svg into
// dir, each whole (store.WriteFileAtomic: a kill leaves the old file or the
// new one, never half of one). Everything is rendered before anything is
// written, and predicted.json, the file the report reads, is written last.
func Write(dir string, run *store.Run, preds []predict.Prediction, v *predict.Validation) error {
	if len(preds) == 0 {
		return fmt.Errorf("no predictions to write")
	}
	b, err := json.MarshalIndent(NewFile(run, preds, v), "", "  ")
	if err != nil {
		return err
	}
	svg, err := predict.Chart(preds, Changed(run), v)
	if err != nil {
		return fmt.Errorf("the predictions' chart: %w", err)
	}
	md := predict.Markdown(preds, Changed(run), v) + "\n![predicted step times](" + ChartFile + ")\n"
	for _, f := range []struct {
		name string
		data []byte
	}{{ChartFile, svg}, {MarkdownFile, []byte(md)}, {JSONFile, append(b, '\n')}} {
		if err := store.WriteFileAtomic(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}
