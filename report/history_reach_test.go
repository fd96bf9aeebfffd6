package report

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/stats"
)

// TestHistoryCannotDetect (audit: at 6–9 runs history said "none"): eight
// nightly runs of five trials (1% a trial) cannot reach that level whatever
// the step, and say so, naming runs and trials; the method line says how many
// runs it takes. With twelve it can, and the method line says which changes
// (the last two runs) cannot be flagged yet.
func TestHistoryCannotDetect(t *testing.T) {
	h, err := LoadHistory(nightsDir(t, 8, 5, 0.7))
	require.NoError(t, err)
	require.Equal(t, 5, h.ChangeTested)
	for _, tr := range h.Trials {
		if finishedRuns(tr) >= changeMinRuns {
			assert.Equal(t, "cannot detect (8 runs, 5 trials)", h.changeText(tr), "%s", tr.Knobs)
		} else {
			assert.Equal(t, "too few runs", h.changeText(tr))
		}
	}
	method := historyMethod(h)
	assert.Contains(t, method, "no change can reach that level (cannot detect): that takes 10 finished runs or more")
	var buf bytes.Buffer
	require.NoError(t, WriteHistory(&buf, h, "text"))
	assert.NotContains(t, buf.String(), " none ")

	h, err = LoadHistory(nightsDir(t, 12, 0, 1))
	require.NoError(t, err)
	assert.Equal(t, "none", h.changeText(h.Trials[0]))
	assert.Contains(t, historyMethod(h), "with 12 finished runs a change needs 3 runs or more after it (and before it) to reach that level, "+
		"so one in the last 2 runs cannot be flagged yet")
	assert.Contains(t, historyMethod(h), "every order of up to 8 runs, else 2000 random orders")
}

// manyTrials is a history of runs nightly runs of trials trials (1% noise);
// trial 0 is scaled by factor from run step (1-based) on.
func manyTrials(runs, trials, step int, factor float64) *History {
	h := &History{Metric: stats.Metrics["throughput"]}
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	for i := 0; i < runs; i++ {
		h.Runs = append(h.Runs, HistoryRun{RunID: fmt.Sprintf("n%02d", i), Created: start.Add(time.Duration(i) * 24 * time.Hour)})
	}
	r := rand.New(rand.NewPCG(9, 9))
	for k := 0; k < trials; k++ {
		tr := HistoryTrial{ID: fmt.Sprintf("t-%02d", k), Knobs: fmt.Sprintf("micro_batch=%d", k+1)}
		for i := 0; i < runs; i++ {
			v := 1000 * math.Exp(0.01*r.NormFloat64())
			if k == 0 && i+1 >= step {
				v *= factor
			}
			tr.Points = append(tr.Points, HistoryPoint{Outcome: "ok", Value: stats.Value{Center: v, N: 6}})
		}
		h.Trials = append(h.Trials, tr)
	}
	h.setChangePoints()
	return h
}

// TestHistoryManyTrials (audit: with ~50 trials tested history never
// reported a change point: 999 permutations cannot give p below 0.001 =
// 5%/50): a 30% drop at run 11 of 20 in one of 50 trials is found, and in
// that trial only. A drop in the last two runs is not (it cannot be yet), and
// the method line says so.
func TestHistoryManyTrials(t *testing.T) {
	h := manyTrials(20, 50, 11, 0.7)
	assert.InDelta(t, 0.001, h.ChangeLevel, 1e-15)
	for i, tr := range h.Trials {
		if i == 0 {
			require.Len(t, tr.Changes, 1, "%s", h.changeText(tr))
			assert.Equal(t, 10, tr.Changes[0].Index)
			assert.Contains(t, h.changeText(tr), "run 11 (2026-12-11 02:00): 0.70×")
			continue
		}
		assert.Equal(t, "none", h.changeText(tr), "%s", tr.ID)
	}
	late := manyTrials(20, 50, 19, 0.7)
	assert.Equal(t, "none", late.changeText(late.Trials[0]))
	assert.Contains(t, historyMethod(late), "a change needs 4 runs or more after it (and before it) to reach that level, "+
		"so one in the last 3 runs cannot be flagged yet")
}

// TestHistoryLeavesOutIncomparable (audit: history charted runs compare
// refuses): runs of another preset, GPU model, step count or GPU count than
// the latest run are left out, each with a warning naming it and why, and a
// copy of a run (the same run ID) counts once.
func TestHistoryLeavesOutIncomparable(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	edits := []struct {
		name string
		edit func(model, workload map[string]any)
	}{
		{"n0-ok", nil},
		{"n1-preset", func(model, _ map[string]any) { model["preset"] = "base" }},
		{"n2-steps", func(_, workload map[string]any) { workload["steps"] = 50 }},
		{"n3-gpus", func(_, workload map[string]any) { workload["gpus"] = 4 }},
		{"n4-ok", nil},
		{"n5-ok", nil},
	}
	for i, e := range edits {
		id := fmt.Sprintf("20261201T0%d0000Z-%s", i, e.name)
		run := gridRun(id, start.Add(time.Duration(i)*24*time.Hour), uint64(10+i), nil).run()
		if e.edit != nil {
			e.edit(run.Manifest.Model, run.Manifest.Workload)
		}
		writeRun(t, filepath.Join(dir, e.name), run)
	}
	// n6 (before n5): on other GPUs; n4-zcopy: n4's directory copied
	run := gridRun("20261201T060000Z-n6-h100", start.Add(5*24*time.Hour-time.Hour), 16, nil).run()
	for i := range run.Manifest.Host.GPUs {
		run.Manifest.Host.GPUs[i].Name = "NVIDIA H100 80GB HBM3"
	}
	writeRun(t, filepath.Join(dir, "n6-h100"), run)
	require.NoError(t, os.CopyFS(filepath.Join(dir, "n4-zcopy"), os.DirFS(filepath.Join(dir, "n4-ok"))))

	h, err := LoadHistory(dir)
	require.NoError(t, err)
	var kept []string
	for _, r := range h.Runs {
		kept = append(kept, filepath.Base(r.Dir))
	}
	assert.Equal(t, []string{"n0-ok", "n4-ok", "n5-ok"}, kept)
	for _, tr := range h.Trials {
		assert.Len(t, tr.Points, 3)
	}
	all := strings.Join(h.Warnings, "\n")
	require.Len(t, h.Warnings, 5, all)
	for _, want := range []string{
		"left out " + filepath.Join(dir, "n4-zcopy") + ": run 20261201T040000Z-n4-ok again (a copy of " + filepath.Join(dir, "n4-ok") + ")",
		"left out " + filepath.Join(dir, "n1-preset") + " (run 20261201T010000Z-n1-preset): compare would refuse it against the latest run 20261201T050000Z-n5-ok",
		"the model differs (OLD bert/base, NEW bert/large)",
		"the measurement differs (OLD 50 steps after 3 warm-up, NEW 5 steps after 3 warm-up)",
		"workload.gpus differs (OLD 4, NEW 8)",
		"the GPU model differs (OLD NVIDIA H100 80GB HBM3, NEW NVIDIA H200)",
	} {
		assert.Contains(t, all, want)
	}
	var buf bytes.Buffer
	require.NoError(t, WriteHistory(&buf, h, "text"))
	assert.Contains(t, buf.String(), "over 3 runs")
	assert.Contains(t, buf.String(), "warning: left out "+filepath.Join(dir, "n3-gpus"))
}
