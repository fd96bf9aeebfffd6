// Package runs connects the predictor to run directories: the one-rank
// run's trials as inputs, a measured multi-rank run as the check, and the
// predicted trials written beside the run's results as files of their own
// (predicted.json, predicted.md) that no verdict, baseline, compare or
// history reads (docs/predict.md).
package runs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/store"
)

// The files a prediction writes into a run directory.
const (
	JSONFile     = "predicted.json"
	MarkdownFile = "predicted.md"
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
// median over its ok launches.
func Measured(run *store.Run) map[string]float64 {
	out := map[string]float64{}
	for _, t := range run.Trials {
		var per []float64
		for _, rp := range t.Repeats {
			if rp.Outcome != store.OK {
				continue
			}
			slowest := 0.0
			for _, r := range rp.Ranks {
				if len(r.Steps) == 0 {
					continue
				}
				sum := 0.0
				for _, s := range r.Steps {
					sum += s.StepMS
				}
				slowest = max(slowest, sum/float64(len(r.Steps)))
			}
			if slowest > 0 {
				per = append(per, slowest)
			}
		}
		if len(per) > 0 {
			out[Key(t.Knobs)] = predict.Median(per)
		}
	}
	return out
}

// ComputeScale is what CPU ranks lose to sharing cores: max(1, ranks x the
// threads of each rank / cores); 1 on GPUs. threads is the one-rank run's
// workload.threads (0: the runner gave the one rank every core).
func ComputeScale(run *store.Run, ranks, cores int) float64 {
	if device(run) != "cpu" {
		return 1
	}
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	threads := 0
	if v, ok := run.Manifest.Workload["threads"].(float64); ok {
		threads = int(v)
	}
	if threads <= 0 {
		threads = cores
	}
	return max(1, float64(ranks*threads)/float64(cores))
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

// File is predicted.json.
type File struct {
	Note        string               `json:"note"`
	Ranks       int                  `json:"ranks"`
	Model       string               `json:"model"`
	Predictions []predict.Prediction `json:"predictions"`
	Validation  *predict.Validation  `json:"validation,omitempty"`
}

// Write writes predicted.json, predicted.md and its chart predicted.svg into dir.
func Write(dir string, run *store.Run, preds []predict.Prediction, v *predict.Validation) error {
	if len(preds) == 0 {
		return fmt.Errorf("no predictions to write")
	}
	f := File{Note: "predictions, not measurements (docs/predict.md)", Ranks: preds[0].Ranks, Model: preds[0].Model,
		Predictions: preds, Validation: v}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, JSONFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	svg, err := Chart(preds, Changed(run), v)
	if err != nil {
		return fmt.Errorf("the predictions' chart: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ChartFile), svg, 0o644); err != nil {
		return err
	}
	md := predict.Markdown(preds, Changed(run), v) + "\n![predicted step times](" + ChartFile + ")\n"
	return os.WriteFile(filepath.Join(dir, MarkdownFile), []byte(md), 0o644)
}
