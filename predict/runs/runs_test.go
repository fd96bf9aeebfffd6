package runs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
)

func ready(v float64) *float64 { return &v }

// oneRankTrial is a measured one-rank trial: 20 ms forward, 40 ms backward,
// two buckets ready at 20 and 40 ms.
func oneRankTrial(id string, overlap string, stepMS float64) *store.TrialRecord {
	var steps []engine.StepMetrics
	for i := 0; i < 4; i++ {
		steps = append(steps, engine.StepMetrics{Step: i, StepMS: stepMS, ForwardMS: 20, BackwardMS: 40, TailMS: 1, OptimizerMS: 5,
			Samples: 8, Tokens: 8 * 64, Buckets: []engine.BucketMetrics{
				{Op: "all_reduce", Bytes: 4 << 20, MS: 0.1, ReadyMS: ready(20)},
				{Op: "all_reduce", Bytes: 8 << 20, MS: 0.1, ReadyMS: ready(40)}}})
	}
	return &store.TrialRecord{Schema: store.SchemaVersion, ID: id, Knobs: map[string]string{"ddp.overlap": overlap},
		Changed: []string{"ddp.overlap"}, Outcome: store.OK, FailedRank: -1, Attempts: 1,
		Started: time.Now(), Finished: time.Now(),
		Repeats: []store.RepeatRecord{{Repeat: 0, Outcome: store.OK, SamplesPerS: 8 / stepMS * 1e3,
			Ranks: []store.RankRecord{{Rank: 0, Steps: steps}}}}}
}

func writeRun(t *testing.T, recs ...*store.TrialRecord) string {
	t.Helper()
	m := &store.Manifest{Schema: store.SchemaVersion, RunID: "r1", Study: "s", Created: time.Now(),
		Objective: store.Objective{Metric: "samples_per_s", Goal: "maximize"},
		Workload:  map[string]any{"device": "cuda", "device_resolved": "cuda"}}
	w, err := store.Create(t.TempDir(), "s", "r1", m)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Dir
}

// Predicted trials live in files of their own: the summary, verdicts,
// baselines, compare and history read the run's measurements only.
func TestPredictionsNeverEnterVerdictsCompareOrHistory(t *testing.T) {
	dir := writeRun(t, oneRankTrial("aaaa0001", "true", 70), oneRankTrial("aaaa0002", "false", 70))
	run, err := store.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(report.Build(run, nil))
	ins, err := Inputs(run)
	if err != nil {
		t.Fatal(err)
	}
	cost := predict.AlphaBeta{AlphaMS: 0.01, BetaMSPerB: 1e-5, Source: "test"} // slow: the predictions differ a lot
	var preds []predict.Prediction
	for _, in := range ins {
		p, err := predict.PredictTrial(in, predict.Setup{Ranks: 8, Cost: cost})
		if err != nil {
			t.Fatal(err)
		}
		preds = append(preds, p)
	}
	if preds[0].StepMS <= 70 || preds[1].StepMS <= preds[0].StepMS {
		t.Fatalf("predictions %g, %g: overlap off must be slower, both slower than one rank", preds[0].StepMS, preds[1].StepMS)
	}
	if err := Write(dir, run, preds, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{JSONFile, MarkdownFile, ChartFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if !strings.Contains(string(md), "not measured") || !strings.Contains(string(md), "no verdict") {
		t.Errorf("predicted.md does not say it is a prediction:\n%s", md)
	}

	run2, err := store.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := json.Marshal(report.Build(run2, nil))
	if string(before) != string(after) {
		t.Error("the run's summary changed once predictions were written")
	}
	side, err := report.LoadSide(dir) // what compare and baseline read
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(side); string(got) != string(before) {
		t.Error("compare's view of the run differs from its measured summary")
	}
	h, err := report.LoadHistory(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Runs) != 1 {
		t.Errorf("history sees %d runs, want the one measured run", len(h.Runs))
	}
	js, _ := os.ReadFile(filepath.Join(dir, JSONFile))
	var f File
	if err := json.Unmarshal(js, &f); err != nil || len(f.Predictions) != 2 || !strings.Contains(f.Note, "not measurements") {
		t.Errorf("predicted.json: %v %+v", err, f.Note)
	}
}

// A measured N-rank run checks the predictions trial by trial, matched by
// knob values.
func TestValidateAgainstAMeasuredRun(t *testing.T) {
	one, _ := store.ReadRun(writeRun(t, oneRankTrial("aaaa0001", "true", 70), oneRankTrial("aaaa0002", "false", 70)))
	ins, _ := Inputs(one)
	var preds []predict.Prediction
	for _, in := range ins {
		p, err := predict.PredictTrial(in, predict.Setup{Ranks: 2, Cost: predict.AlphaBeta{BetaMSPerB: 1e-6, Source: "t"}})
		if err != nil {
			t.Fatal(err)
		}
		preds = append(preds, p)
	}
	// The measured 2-rank run: overlap on 10% slower than predicted, off exact.
	on, off := oneRankTrial("bbbb0001", "true", preds[0].StepMS*1.1), oneRankTrial("bbbb0002", "false", preds[1].StepMS)
	meas, _ := store.ReadRun(writeRun(t, on, off))
	v := predict.Validate(preds, Measured(meas), func(p predict.Prediction) string { return Key(p.Knobs) }, Changed(one))
	if len(v.Checks) != 2 {
		t.Fatalf("checks %+v", v)
	}
	if e := v.Checks[0].Error; e > -0.09 || e < -0.092 {
		t.Errorf("error of the overlap trial %g, want -1/11", e)
	}
	if v.Checks[1].Error != 0 {
		t.Errorf("error of the overlap-off trial %g", v.Checks[1].Error)
	}
	if v.PredictedBest != "aaaa0001" || v.SameBest != (preds[0].StepMS*1.1 < preds[1].StepMS) {
		t.Errorf("best: %+v", v)
	}
}

func TestInputsRefuseMultiRankRuns(t *testing.T) {
	r := oneRankTrial("aaaa0001", "true", 70)
	r.Repeats[0].Ranks = append(r.Repeats[0].Ranks, r.Repeats[0].Ranks[0])
	run, _ := store.ReadRun(writeRun(t, r))
	if _, err := Inputs(run); err == nil || !strings.Contains(err.Error(), "one-rank") {
		t.Errorf("a two-rank run as input: %v", err)
	}
}

// loadedTrial is oneRankTrial measured with the κ calibration's load: its
// backward takes loadedMS.
func loadedTrial(id, overlap string, loadedMS float64) *store.TrialRecord {
	t := oneRankTrial(id, overlap, 80)
	for i := range t.Repeats[0].Ranks[0].Steps {
		s := &t.Repeats[0].Ranks[0].Steps[i]
		s.BackwardMS, s.InterfereGBps = loadedMS, 100
	}
	return t
}

func TestKappaFromTheCalibrationLaunch(t *testing.T) {
	clean, err := store.ReadRun(writeRun(t, oneRankTrial("aaaa0001", "true", 70), oneRankTrial("aaaa0002", "false", 70)))
	if err != nil {
		t.Fatal(err)
	}
	cal, err := store.ReadRun(writeRun(t, loadedTrial("aaaa0001", "true", 50)))
	if err != nil {
		t.Fatal(err)
	}
	if Loaded(clean) || !Loaded(cal) {
		t.Fatalf("Loaded: clean %t, calibration %t", Loaded(clean), Loaded(cal))
	}
	c, err := Kappa([]*store.Run{clean}, []*store.Run{cal})
	if err != nil {
		t.Fatal(err)
	}
	// 40 ms of backward alone, 50 ms beside the load.
	if c.Kappa != 1.25 || c.Ratio != 1.25 || c.BackwardMS != 40 || c.LoadedBackwardMS != 50 || c.LoadGBps != 100 || c.Steps != 4 {
		t.Errorf("calibration %+v, want κ 1.25 from 40 and 50 ms", c)
	}
	faster, _ := store.ReadRun(writeRun(t, loadedTrial("aaaa0001", "true", 30)))
	if c, err := Kappa([]*store.Run{clean}, []*store.Run{faster}); err != nil || c.Kappa != 1 || c.Ratio != 0.75 {
		t.Errorf("a loaded backward faster than the clean one (noise): κ %g (ratio %g, %v), want 1 and the ratio kept", c.Kappa, c.Ratio, err)
	}
	stuck := loadedTrial("aaaa0001", "true", 2000)
	stuck.Repeats[0].Ranks[0].Steps[1].InterfereTimeouts = 12 // the 12 blocks of one pass stopped at their deadline
	stuck.Repeats[0].Ranks[0].Steps[2].InterfereTimeouts = 12 // a running count: still that pass
	void, _ := store.ReadRun(writeRun(t, stuck))
	if _, err := Kappa([]*store.Run{clean}, []*store.Run{void}); err == nil || !strings.Contains(err.Error(), "void") ||
		!strings.Contains(err.Error(), "12 time") {
		t.Errorf("a load that stopped at its deadline voids the calibration: %v", err)
	}
	if _, err := Kappa([]*store.Run{clean}, nil); err == nil || !strings.Contains(err.Error(), "--kappa auto") {
		t.Errorf("no calibration: %v", err)
	}
	ins, _ := Inputs(clean)
	p, err := predict.PredictTrial(ins[0], predict.Setup{Ranks: 8, Cost: predict.AlphaBeta{AlphaMS: 0.01, BetaMSPerB: 1e-7},
		Kappa: c.Kappa, Calibration: &c})
	if err != nil || p.Calibration == nil || p.Kappa != 1.25 {
		t.Errorf("the prediction carries its κ and where it came from: %+v, %v", p.Calibration, err)
	}
}

// shadowTrial is a stretch calibration launch of oneRankTrial's trial:
// steps alternating clean (backward cleanMS) and loaded (loadedMS, traffic
// on a group of ranks).
func shadowTrial(id, overlap string, ranks int, cleanMS, loadedMS float64) *store.TrialRecord {
	t := oneRankTrial(id, overlap, 80)
	for i := range t.Repeats[0].Ranks[0].Steps {
		s := &t.Repeats[0].Ranks[0].Steps[i]
		s.InterfereRanks, s.BackwardMS = ranks, cleanMS
		if i%2 == 1 {
			s.BackwardMS, s.InterfereGBps = loadedMS, 0.5
		}
	}
	return t
}

func TestStretchesPerTrial(t *testing.T) {
	cal, err := store.ReadRun(writeRun(t, shadowTrial("aaaa0001", "true", 2, 40, 50), shadowTrial("aaaa0002", "false", 2, 40, 41)))
	if err != nil {
		t.Fatal(err)
	}
	if !Loaded(cal) || ShadowRanks(cal) != 2 {
		t.Fatalf("a stretch calibration run: Loaded %t, ShadowRanks %d", Loaded(cal), ShadowRanks(cal))
	}
	st, err := Stretches([]*store.Run{cal}, 2)
	if err != nil {
		t.Fatal(err)
	}
	on, off := st[Key(map[string]string{"ddp.overlap": "true"})], st[Key(map[string]string{"ddp.overlap": "false"})]
	if on.Kappa != 1.25 || on.BackwardMS != 40 || on.LoadedBackwardMS != 50 || on.Launches != 1 || on.Steps != 2 || on.ShadowRanks != 2 {
		// steps: clean, loaded, clean, loaded: both loaded steps have a clean neighbour
		t.Errorf("overlap on: %+v, want κ 1.25 from 40 and 50 ms", on)
	}
	// oneRankTrial's buckets: 4 and 8 MiB at 0.1 ms in every loaded step.
	if len(on.Buckets) != 2 || on.Buckets[0].Bytes != 4<<20 || on.Buckets[0].MS != 0.1 || on.Buckets[0].Steps != 2 {
		t.Errorf("the calibrated buckets: %+v, want 4 and 8 MiB at 0.1 ms over 2 loaded steps", on.Buckets)
	}
	if off.Kappa != 1.025 {
		t.Errorf("overlap off: κ %g, want 1.025", off.Kappa)
	}
	if _, err := Stretches([]*store.Run{cal}, 4); err == nil || !strings.Contains(err.Error(), "on 2 ranks, predicting for 4") {
		t.Errorf("a calibration on another group: %v", err)
	}
	clean, _ := store.ReadRun(writeRun(t, oneRankTrial("aaaa0001", "true", 70)))
	if ShadowRanks(clean) != 0 {
		t.Error("a one-rank run is no stretch calibration")
	}
}

// measuredLaunches is an N-rank trial measured in launches of the given
// mean step times (one rank's steps, each launch's mean that time).
func measuredLaunches(id, bucket string, ms ...float64) *store.TrialRecord {
	t := &store.TrialRecord{Schema: store.SchemaVersion, ID: id, Knobs: map[string]string{"ddp.bucket_mb": bucket},
		Outcome: store.OK, FailedRank: -1, Attempts: 1, Started: time.Now(), Finished: time.Now()}
	for i, m := range ms {
		t.Repeats = append(t.Repeats, store.RepeatRecord{Repeat: i, Outcome: store.OK,
			Ranks: []store.RankRecord{{Rank: 0, Steps: []engine.StepMetrics{{StepMS: m - 1}, {StepMS: m + 1}}}}})
	}
	return t
}

func TestDecideWinner(t *testing.T) {
	key := func(b string) string { return Key(map[string]string{"ddp.bucket_mb": b}) }
	ids := map[string]string{"a": key("1"), "b": key("25"), "c": key("0.05")}
	decide := func(recs ...*store.TrialRecord) predict.Validation {
		run, err := store.ReadRun(writeRun(t, recs...))
		if err != nil {
			t.Fatal(err)
		}
		l := MeasuredLaunches(run)
		v := predict.Validation{MeasuredBest: "a"}
		for _, id := range []string{"a", "b", "c"} {
			v.Checks = append(v.Checks, predict.Check{ID: id})
		}
		DecideWinner(&v, l, func(id string) string { return ids[id] })
		return v
	}
	// 100 ms against 130 and 160, each over 3 launches of ±1 ms: separated.
	v := decide(measuredLaunches("a", "1", 99, 100, 101), measuredLaunches("b", "25", 129, 130, 131), measuredLaunches("c", "0.05", 159, 160, 161))
	if !v.WinnerDecidable || len(v.Separations) != 2 {
		t.Errorf("separated trials: decidable %t, %q", v.WinnerDecidable, v.Separations)
	}
	// One trial within the noise of the best: 100 against 101 ± 3.
	v = decide(measuredLaunches("a", "1", 99, 100, 101), measuredLaunches("b", "25", 98, 101, 104), measuredLaunches("c", "0.05", 159, 160, 161))
	if v.WinnerDecidable || !strings.Contains(strings.Join(v.Separations, ";"), "within the noise") {
		t.Errorf("a trial within the noise: decidable %t, %q", v.WinnerDecidable, v.Separations)
	}
	// One launch a trial: no interval, not decidable whatever the gap.
	v = decide(measuredLaunches("a", "1", 100), measuredLaunches("b", "25", 200), measuredLaunches("c", "0.05", 300))
	if v.WinnerDecidable {
		t.Error("one launch a trial: decided")
	}
	// Holm: two trials each 13% slower over 3 launches of ±6%: each test
	// alone rejects at 5% (p 0.037, the interval below 1), but the smaller p
	// is not below 0.05/2, so Holm's correction rejects neither.
	v = decide(measuredLaunches("a", "1", 96, 100, 104), measuredLaunches("b", "25", 107, 113, 119), measuredLaunches("c", "0.05", 107, 113, 119))
	if v.WinnerDecidable || !strings.Contains(strings.Join(v.Separations, ";"), "not after Holm's correction") {
		t.Errorf("a gap that does not survive Holm's correction: decidable %t (%q)", v.WinnerDecidable, v.Separations)
	}
}

// The verdict's inputs from the runs as they are, through Validate and
// DecideWinner together: a tainted launch left out as every statistic leaves
// it out, a trial measured but not predicted (or predicted but not measured)
// making the validation incomplete, and launches of another rank count refused.
func TestValidationFromRuns(t *testing.T) {
	key := func(b string) string { return Key(map[string]string{"ddp.bucket_mb": b}) }
	pred := func(id, bucket string, ms float64) predict.Prediction {
		return predict.Prediction{ID: id, Knobs: map[string]string{"ddp.bucket_mb": bucket}, StepMS: ms, LowMS: ms * 0.9, HighMS: ms * 1.1}
	}
	changed := func(p predict.Prediction) string { return p.Knobs["ddp.bucket_mb"] }
	validate := func(preds []predict.Prediction, recs ...*store.TrialRecord) predict.Validation {
		t.Helper()
		run, err := store.ReadRun(writeRun(t, recs...))
		if err != nil {
			t.Fatal(err)
		}
		l := MeasuredLaunches(run)
		med := map[string]float64{}
		for k, v := range l {
			med[k] = predict.Median(v)
		}
		v := predict.Validate(preds, med, func(p predict.Prediction) string { return Key(p.Knobs) }, changed)
		ids := map[string]string{}
		for _, p := range preds {
			ids[p.ID] = Key(p.Knobs)
		}
		DecideWinner(&v, l, func(id string) string { return ids[id] })
		return v
	}
	two := []predict.Prediction{pred("a", "1", 100), pred("b", "25", 130)}

	// A tainted launch (250 ms, relaunched) is not pooled: a's 99-101 against
	// b's 129-131 stays separated.
	a := measuredLaunches("a", "1", 99, 100, 101, 250)
	a.Repeats[3].Tainted = "throttled"
	v := validate(two, a, measuredLaunches("b", "25", 129, 130, 131))
	if !v.WinnerDecidable || !v.SameBest || v.Incomplete() != "" {
		t.Errorf("a tainted launch pooled: decidable %t, same %t, %q (%q)", v.WinnerDecidable, v.SameBest, v.Incomplete(), v.Separations)
	}

	// A faster trial measured but not predicted: the validation is incomplete,
	// no winner decided, and the line says why.
	v = validate(two, measuredLaunches("a", "1", 99, 100, 101), measuredLaunches("b", "25", 129, 130, 131),
		measuredLaunches("c", "0.05", 60, 61, 62))
	if v.WinnerDecidable || len(v.MeasuredOnly) != 1 || v.MeasuredOnly[0] != key("0.05") ||
		!strings.Contains(v.WinnerLine(), "no prediction for the measured "+key("0.05")) {
		t.Errorf("a measured trial without a prediction: decidable %t, measured only %q, %q", v.WinnerDecidable, v.MeasuredOnly, v.WinnerLine())
	}

	// A prediction without a measurement: incomplete too.
	v = validate(append(two, pred("c", "0.05", 90)), measuredLaunches("a", "1", 99, 100, 101), measuredLaunches("b", "25", 129, 130, 131))
	if v.WinnerDecidable || !strings.Contains(v.Incomplete(), "no measurement for c") {
		t.Errorf("a prediction without a measurement: decidable %t, %q", v.WinnerDecidable, v.Incomplete())
	}

	// Nothing matched: not a median error of 0 that passes.
	v = validate(two, measuredLaunches("x", "8", 99, 100, 101))
	if !strings.Contains(v.Incomplete(), "no trial both predicted and measured") || v.WinnerDecidable {
		t.Errorf("nothing matched: %q, decidable %t", v.Incomplete(), v.WinnerDecidable)
	}
	if md := predict.Markdown(two, changed, &v); strings.Contains(md, "Median absolute error") || !strings.Contains(md, "Not judged: ") {
		t.Errorf("an incomplete check states an error or a winner:\n%s", md)
	}

	// Launches of another rank count are refused (measuredLaunches runs one).
	run, err := store.ReadRun(writeRun(t, measuredLaunches("a", "1", 99, 100)))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckRanks(run, 2); err == nil || !strings.Contains(err.Error(), "ran 1 ranks, not the 2 predicted") {
		t.Errorf("a one-rank run checked as 2 ranks: %v", err)
	}
	if err := CheckRanks(run, 1); err != nil {
		t.Errorf("a one-rank run checked as one: %v", err)
	}
}

// predictedPair is two predictions of a one-rank run's trials.
func predictedPair(t *testing.T, run *store.Run) []predict.Prediction {
	t.Helper()
	ins, err := Inputs(run)
	if err != nil {
		t.Fatal(err)
	}
	var preds []predict.Prediction
	for _, in := range ins {
		p, err := predict.PredictTrial(in, predict.Setup{Ranks: 2, Cost: predict.AlphaBeta{AlphaMS: 0.01, BetaMSPerB: 1e-6, Source: "test"}})
		if err != nil {
			t.Fatal(err)
		}
		preds = append(preds, p)
	}
	return preds
}

// Write replaces predicted.* whole (a temporary file renamed over each: a
// kill leaves the old file or the new one), never writing through the old
// file: a predicted.json hard-linked elsewhere keeps the other name's
// content; and predicted.json records the run it was predicted from, which
// the report checks.
func TestWriteIsAtomicAndNamesTheRun(t *testing.T) {
	dir := writeRun(t, oneRankTrial("aaaa0001", "true", 70), oneRankTrial("aaaa0002", "false", 70))
	run, err := store.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "kept.json")
	if err := os.WriteFile(elsewhere, []byte("not yours\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(elsewhere, filepath.Join(dir, JSONFile)); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, run, predictedPair(t, run), nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(elsewhere); string(b) != "not yours\n" {
		t.Errorf("Write wrote through the old predicted.json (not a rename over it): the other name now holds %d bytes of predictions", len(b))
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	js, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var f File
	if err := json.Unmarshal(js, &f); err != nil || f.RunID != "r1" || len(f.Predictions) != 2 || f.Ranks != 2 {
		t.Fatalf("predicted.json: %v, run_id %q, %d predictions on %d ranks", err, f.RunID, len(f.Predictions), f.Ranks)
	}
	if got, err := report.LoadPredicted(run); err != nil || got == nil || len(got.Predictions) != 2 {
		t.Errorf("the report does not read the run's own predictions: %v", err)
	}
}
