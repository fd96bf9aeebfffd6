package runs

import (
	"fmt"
	"math"

	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// MeasuredLaunches is Measured before the median: per trial key, each ok
// launch's slowest rank's mean step time, in the runs' order, as every
// verdict counts launches (measure.TrialLaunches): a tainted launch (a
// throttled GPU, NCCL on another transport; the runner launches it again) is
// left out, as it is of every statistic.
func MeasuredLaunches(rs ...*store.Run) map[string][]float64 {
	per := map[string][]float64{}
	for _, run := range rs {
		for i := range run.Trials {
			t := &run.Trials[i]
			if v := measure.TrialLaunches(t, stats.Metrics["step_time"]).Values; len(v) > 0 {
				per[Key(t.Knobs)] = append(per[Key(t.Knobs)], v...)
			}
		}
	}
	return per
}

// CheckRanks refuses a measured run whose ok launches did not run n ranks:
// a check of predictions for n ranks pools launches of n ranks only.
func CheckRanks(run *store.Run, n int) error {
	for _, t := range run.Trials {
		for _, rp := range t.Repeats {
			if rp.Outcome == store.OK && len(rp.Ranks) != n {
				return fmt.Errorf("%s: trial %s's launch %d ran %d ranks, not the %d predicted", run.Dir, t.ID, rp.Repeat, len(rp.Ranks), n)
			}
		}
	}
	return nil
}

// DecideWinner says whether the measurement itself separates its best trial
// from every other (docs/predict.md, "Whether the measurement has a winner"):
// the measured best (least median step time) against each other trial,
// launch by launch, with the stats package's comparison of step times
// (Welch's t on log step times, stats.Compare at 95%, δ = 0: only the
// direction is asked) and Holm's correction over the other trials
// (stats.Holm at stats.Alpha). The winner is decidable when every other
// trial is slower with its test rejected after the correction; one launch a
// trial, or any other trial within the noise, is not; nor is an incomplete
// validation (predict.Validation.Incomplete: a trial predicted but not
// measured, or measured but not predicted). It sets v's WinnerDecidable and
// Separations (one line per other trial).
func DecideWinner(v *predict.Validation, launches map[string][]float64, key func(id string) string) {
	v.WinnerDecidable, v.Separations = false, nil
	best := launches[key(v.MeasuredBest)]
	if v.MeasuredBest == "" || len(best) == 0 || v.Incomplete() != "" { // incomplete: no winner to judge
		return
	}
	type other struct {
		id string
		c  stats.Comparison
	}
	var others []other
	var ps []float64
	for _, c := range v.Checks {
		if c.ID == v.MeasuredBest {
			continue
		}
		cmp := stats.Compare(launches[key(c.ID)], best, stats.Metrics["step_time"], stats.Level{Confidence: stats.Confidence})
		others = append(others, other{c.ID, cmp})
		ps = append(ps, cmp.P)
	}
	if len(others) == 0 {
		return
	}
	rejected := stats.Holm(ps, stats.Alpha)
	decidable := true
	for k, o := range others {
		slower := o.c.Bounded() && o.c.Hi < 1 // best / other: the other trial's step is longer
		ok := slower && rejected[k]
		decidable = decidable && ok
		lo, hi := o.c.Lo, o.c.Hi
		what := "within the noise"
		if ok {
			what = "slower, separated"
		} else if slower {
			what = "slower, not after Holm's correction"
		}
		v.Separations = append(v.Separations, fmt.Sprintf("%s: best/this %.3f [%s, %s] (95%%), p %s, %d and %d launches: %s",
			o.id, o.c.Ratio, num(lo), num(hi), num(o.c.P), o.c.NTrial, o.c.NBase, what))
	}
	v.WinnerDecidable = decidable
}

func num(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "none"
	}
	return fmt.Sprintf("%.3g", f)
}
