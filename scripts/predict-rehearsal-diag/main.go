// Command predict-rehearsal-diag is a diagnostic of the one-GPU rehearsal's
// prediction (docs/predict.md, "(b) The one-GPU rehearsal"), not a
// prediction: it predicts the rehearsal's trials from the one-rank run as
// `casestudy predict ONE --gpus N --ranks-per-gpu N --fit FIT` does, but with
// each bucket size that the rehearsal timed after its first bucket taken at
// the rehearsal's own median collective time (its transfer time: the least
// over ranks, as `bench allreduce` reports; other sizes from FIT). It is
// in-sample by construction: it says how much of the prediction's error is
// the collectives' cost and how much the schedule and the compute, never how
// well the model predicts.
//
//	go run ./scripts/predict-rehearsal-diag ONE_RUN REHEARSAL_RUN BENCH_JSON
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/casestudy/casestudy/bench"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/predict/runs"
	"github.com/casestudy/casestudy/store"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: predict-rehearsal-diag ONE_RUN REHEARSAL_RUN BENCH_JSON")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "predict-rehearsal-diag:", err)
		os.Exit(2)
	}
}

func run(oneDir, rehDir, fitFile string) error {
	one, err := store.ReadRun(oneDir)
	if err != nil {
		return err
	}
	reh, err := store.ReadRun(rehDir)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(fitFile)
	if err != nil {
		return err
	}
	var res bench.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("%s: not a bench allreduce --json result: %w", fitFile, err)
	}
	var pts []predict.Point
	for _, r := range res.Rows {
		pts = append(pts, predict.Point{Bytes: r.Bytes, MS: r.FitMS()})
	}
	fit, err := predict.FitAlphaBeta(pts, res.Ranks, fitFile)
	if err != nil {
		return err
	}
	ranks := 0
	times := map[int64][]float64{} // bucket size: its transfer times after the first bucket
	for _, t := range reh.Trials {
		for _, rp := range t.Repeats {
			if len(rp.Ranks) == 0 {
				continue
			}
			ranks = len(rp.Ranks)
			for _, s := range rp.Ranks[0].Steps { // every rank carries the same transfer time
				for i, b := range s.Buckets {
					if i > 0 && b.TransferMS > 0 {
						times[b.Bytes] = append(times[b.Bytes], b.TransferMS)
					}
				}
			}
		}
	}
	if ranks < 2 || len(times) == 0 {
		return fmt.Errorf("%s: no multi-rank steps with split bucket times", rehDir)
	}
	cost := predict.Calibrated{Ranks: ranks, Fallback: fit}
	sizes := make([]int64, 0, len(times))
	for b := range times {
		sizes = append(sizes, b)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	fmt.Printf("Diagnostic, in-sample (not a prediction): the rehearsal's own collective times\n\n")
	for _, b := range sizes {
		ms := predict.Median(times[b])
		cost.Buckets = append(cost.Buckets, predict.CalibratedBucket{Op: predict.AllReduce, Bytes: b, MS: ms, Steps: len(times[b])})
		fit, _, _ := fit.Time(predict.AllReduce, b, ranks)
		fmt.Printf("- %.2f MiB: %.2f ms measured (median of %d), %.2f ms the fit\n", float64(b)/(1<<20), ms, len(times[b]), fit)
	}
	ins, err := runs.Inputs(one)
	if err != nil {
		return err
	}
	setup := predict.Setup{Ranks: ranks, Cost: cost, ComputeScale: float64(ranks)}
	var preds []predict.Prediction
	for _, in := range ins {
		p, err := predict.PredictTrial(in, setup)
		if err != nil {
			return err
		}
		preds = append(preds, p)
	}
	v := predict.Validate(preds, runs.Measured(reh), func(p predict.Prediction) string { return runs.Key(p.Knobs) }, runs.Changed(one))
	fmt.Printf("\n| trial | changed | with these times | measured | error |\n|---|---|---|---|---|\n")
	for _, c := range v.Checks {
		fmt.Printf("| %s | %s | %.2f ms | %.2f ms | %+.1f%% |\n", c.ID, c.Changed, c.Predicted, c.Measured, 100*c.Error)
	}
	fmt.Printf("\nMedian absolute error %.1f%%; same best: %t.\n", 100*v.MedianAbsError, v.SameBest)
	return nil
}
