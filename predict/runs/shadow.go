package runs

import (
	"fmt"
	"sort"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/store"
)

// ShadowRanks is the group of a stretch calibration run (CASESTUDY_INTERFERE=
// gloo:N: interfere_ranks on its steps), 0 for any other run.
func ShadowRanks(run *store.Run) int {
	n := 0
	anyStep(run, func(s engine.StepMetrics) bool { n = s.InterfereRanks; return n > 0 })
	return n
}

// Stretches is the stretch calibration of every trial of stretch
// calibration runs (docs/predict.md): per trial key, from each ok launch
// (rank 0's measured steps in order), each loaded step's backward
// (interfere_gbps > 0: its buckets went to the group) against the clean
// steps beside it (predict.CalibrateShadow). Every run must be on a group of
// ranks ranks.
func Stretches(cal []*store.Run, ranks int) (map[string]predict.Calibration, error) {
	per := map[string][][]predict.ShadowStep{}
	for _, run := range cal {
		if n := ShadowRanks(run); n != ranks {
			return nil, fmt.Errorf("%s: a stretch calibration on %d ranks, predicting for %d: run it with --predict %d --interfere gloo", run.Dir, n, ranks, ranks)
		}
		for _, t := range run.Trials {
			for _, rp := range t.Repeats {
				if rp.Outcome != store.OK || len(rp.Ranks) == 0 {
					continue
				}
				var l []predict.ShadowStep
				for _, s := range rp.Ranks[0].Steps {
					st := predict.ShadowStep{BackwardMS: s.BackwardMS, Loaded: s.InterfereGBps > 0, GBps: s.InterfereGBps}
					for _, b := range s.Buckets {
						op := b.Op
						if op == "" {
							op = predict.AllReduce
						}
						st.Buckets = append(st.Buckets, predict.Bucket{Op: op, Bytes: b.Bytes, MS: b.MS})
					}
					l = append(l, st)
				}
				k := Key(t.Knobs)
				per[k] = append(per[k], l)
			}
		}
	}
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string]predict.Calibration{}
	for _, k := range keys {
		c, err := predict.CalibrateShadow(k, ranks, per[k])
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no trial finished in the stretch calibration runs")
	}
	return out, nil
}
