package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/store"
)

// predictedFile is two predicted trials with the knobs of the oat fixture's
// baseline and of its micro_batch=32 trial, checked against measurements in
// which the model picked a different winner.
func predictedFile() predict.File {
	base, mb32 := gptKnobs("bf16", "8", "false"), gptKnobs("bf16", "32", "false")
	return predict.File{Note: predict.Note, Ranks: 8, Model: "NCCL h100-sxm-8",
		Predictions: []predict.Prediction{
			{ID: "p1", Knobs: base, Ranks: 8, Overlap: true, StepMS: 123.45, LowMS: 120, HighMS: 127, ExposedCommMS: 4.5,
				Inputs: predict.Profile{ForwardMS: 40, BackwardMS: 80, Buckets: make([]predict.Bucket, 3)}, Kappa: 1.07, ComputeScale: 1, CostError: 0.028, Launches: 2},
			{ID: "p2", Knobs: mb32, Ranks: 8, Overlap: true, StepMS: 456.78, LowMS: 450, HighMS: 460, ExposedCommMS: 1,
				Inputs: predict.Profile{ForwardMS: 150, BackwardMS: 300}, Kappa: 1.07, ComputeScale: 1, CostError: 0.028, Launches: 2},
		},
		Validation: &predict.Validation{
			Checks: []predict.Check{{ID: "p1", Changed: "(baseline)", Predicted: 123.45, Measured: 130, Error: -0.0504, InBand: false},
				{ID: "p2", Changed: "micro_batch=32", Predicted: 456.78, Measured: 110, Error: 3.1525, InBand: false}},
			MedianAbsError: 1.6, PredictedBest: "p1", MeasuredBest: "p2", SameBest: false}}
}

// Predicted trials are shown in their own section of report.md and
// report.html, with the error per trial and whether the winner is the same,
// and nowhere else: summary.json, the trials table, the headline and the
// verdicts are those of the run without them.
func TestPredictedSectionApartFromMeasurements(t *testing.T) {
	run := readFixture(t, "runs/gpt-oat")
	dir := t.TempDir()
	writeRun(t, dir, run)
	run.Dir = dir
	formats := []string{"md", "html", "json"}
	without := t.TempDir()
	_, err := Write(run, nil, without, formats)
	require.NoError(t, err)

	writePredicted(t, dir, run.Manifest.RunID, predictedFile())
	with := t.TempDir()
	_, err = Write(run, nil, with, formats)
	require.NoError(t, err)

	read := func(d, f string) string {
		b, err := os.ReadFile(filepath.Join(d, f))
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, read(without, "summary.json"), read(with, "summary.json"), "summary.json (verdicts, baseline, compare and history read it) must not change")
	assert.NotContains(t, read(with, "summary.json"), "123.45")

	md := read(with, "report.md")
	sec := md[strings.Index(md, "## Predicted trials on 8 ranks (not measured)"):]
	require.NotEqual(t, md, sec)
	assert.Contains(t, sec, "Predictions, not measurements")
	assert.Contains(t, sec, "no verdict")
	assert.Contains(t, sec, "| baseline | true | 123.45 ms | 120.00–127.00 ms |", "labelled as the run's trial with the same knobs")
	assert.Contains(t, sec, "| micro_batch=32 |")
	assert.Contains(t, sec, "κ 1.07")
	assert.Contains(t, sec, "forward 40.00 ms, backward 80.00 ms")
	assert.Contains(t, sec, "| (baseline) | 123.45 ms | 130.00 ms | -5.0% | false |")
	assert.Contains(t, sec, "| micro_batch=32 | 456.78 ms | 110.00 ms | +315.2% | false |")
	assert.Contains(t, sec, "the model picked a different winner")
	// Whether that winner means anything: the measurement's own separation
	// (predicted.md says it; the report said only same or different).
	assert.Contains(t, sec, "The winner is not decidable by the measurement: its best trial is not separated from every other (no launches to compare).")
	before := md[:strings.Index(md, "## Predicted trials")]
	assert.NotContains(t, before, "123.45", "no prediction above its section (headline, trials, verdicts)")
	assert.Equal(t, strings.Replace(read(without, "report.md"), "## Checklist findings", "", 1)[:len(before)], before,
		"the measured part of report.md is the same with predictions")

	html := read(with, "report.html")
	assert.Contains(t, html, `<h2 id="predicted">Predicted trials on 8 ranks (not measured)</h2>`)
	assert.Contains(t, html, `href="#predicted"`)
	i := strings.Index(html, `id="predicted"`)
	assert.Contains(t, html[i:], "<svg", "the section has its chart")
	assert.Contains(t, html[i:], "Predicted step time on 8 ranks (not measured)")
	assert.Contains(t, html[i:], "315.2%</td>")
	assert.NotContains(t, html[:i], "123.45", "no prediction outside its section")
	assert.NotContains(t, read(without, "report.html"), `id="predicted"`)
}

func TestLoadPredictedErrors(t *testing.T) {
	dir := t.TempDir()
	f, err := LoadPredicted(&store.Run{Dir: dir})
	require.NoError(t, err)
	assert.Nil(t, f, "no predicted.json: no section")
	require.NoError(t, os.WriteFile(filepath.Join(dir, predict.JSONFile), []byte("{not json"), 0o644))
	_, err = LoadPredicted(&store.Run{Dir: dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), predict.JSONFile)
	require.NoError(t, os.WriteFile(filepath.Join(dir, predict.JSONFile), []byte(`{"ranks": 8, "predictions": []}`), 0o644))
	_, err = LoadPredicted(&store.Run{Dir: dir})
	require.ErrorContains(t, err, "no predictions")
}

// writePredicted writes f as dir's predicted.json, recording the run ID it
// was predicted from ("": a file written before run_id was recorded).
func writePredicted(t *testing.T, dir, runID string, f predict.File) {
	t.Helper()
	b, err := json.Marshal(struct {
		RunID string `json:"run_id,omitempty"`
		predict.File
	}{runID, f})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, predict.JSONFile), b, 0o644))
}

// A predicted.json that cannot be read is bad input (exit status 2) that
// names the file and says to predict again: cut short by a crash, or a FIFO
// (read without blocking: it used to hang the report).
func TestLoadPredictedUnreadableIsInputError(t *testing.T) {
	run := readFixture(t, "runs/gpt-oat")
	dir := t.TempDir()
	writeRun(t, dir, run)
	run.Dir = dir
	writePredicted(t, dir, run.Manifest.RunID, predictedFile())
	whole, err := os.ReadFile(filepath.Join(dir, predict.JSONFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, predict.JSONFile), whole[:len(whole)/2], 0o644))
	_, err = LoadPredicted(run)
	require.Error(t, err)
	assert.Equal(t, exitcode.Input, exitcode.Of(err), err.Error())
	assert.Contains(t, err.Error(), filepath.Join(dir, predict.JSONFile))
	assert.Contains(t, err.Error(), "casestudy predict "+dir)
	_, err = Write(run, nil, t.TempDir(), []string{"md"})
	assert.Equal(t, exitcode.Input, exitcode.Of(err), "the report too: %v", err)

	require.NoError(t, os.Remove(filepath.Join(dir, predict.JSONFile)))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, predict.JSONFile), 0o644))
	done := make(chan error, 1)
	go func() { _, err := LoadPredicted(run); done <- err }()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Equal(t, exitcode.Input, exitcode.Of(err), err.Error())
		assert.Contains(t, err.Error(), "a FIFO")
	case <-time.After(5 * time.Second):
		t.Fatal("LoadPredicted blocks on a FIFO named predicted.json")
	}
}

// A report shows only its own run's predictions: predicted.json records
// the run it was predicted from (run_id), and one of another run (casestudy
// predict A --out B wrote it there) is refused with exit status 2. A file
// without run_id (written before it was recorded) is taken only from a
// one-rank run whose plan holds every predicted trial.
func TestLoadPredictedOnlyTheRunsOwn(t *testing.T) {
	run := readFixture(t, "runs/gpt-oat")
	dir := t.TempDir()
	writeRun(t, dir, run)
	run.Dir = dir

	writePredicted(t, dir, "20990101T000000Z-other", predictedFile())
	_, err := LoadPredicted(run)
	require.Error(t, err)
	assert.Equal(t, exitcode.Input, exitcode.Of(err), err.Error())
	assert.Contains(t, err.Error(), filepath.Join(dir, predict.JSONFile)+": it was predicted from the run 20990101T000000Z-other, not from this run ("+run.Manifest.RunID+")")
	_, err = Write(run, nil, t.TempDir(), []string{"md"})
	assert.Equal(t, exitcode.Input, exitcode.Of(err), "the report is refused, not written with another run's predictions: %v", err)

	writePredicted(t, dir, run.Manifest.RunID, predictedFile())
	f, err := LoadPredicted(run)
	require.NoError(t, err)
	assert.Len(t, f.Predictions, 2)

	// An older file: its trials (p1, p2) are not this run's.
	writePredicted(t, dir, "", predictedFile())
	_, err = LoadPredicted(run)
	require.Error(t, err)
	assert.Equal(t, exitcode.Input, exitcode.Of(err))
	assert.Contains(t, err.Error(), "it records no run ID")

	// An older file whose trials are the plan's, by ID and knobs, in a
	// one-rank run: taken; the same in a run of several ranks: refused.
	old := predictedFile()
	for i := range old.Predictions {
		old.Predictions[i].ID, old.Predictions[i].Knobs = run.Manifest.Plan[i].ID, run.Manifest.Plan[i].Knobs
	}
	one := *run
	one.Manifest.Workload = map[string]any{"ranks": 1, "gpus": 1, "world_of_one": true}
	oneDir := t.TempDir()
	writeRun(t, oneDir, &one)
	one.Dir = oneDir
	writePredicted(t, oneDir, "", old)
	f, err = LoadPredicted(&one)
	require.NoError(t, err)
	assert.Len(t, f.Predictions, 2)
	eight := *run
	eight.Manifest.Workload = map[string]any{"ranks": 8, "gpus": 8}
	eightDir := t.TempDir()
	writeRun(t, eightDir, &eight)
	eight.Dir = eightDir
	writePredicted(t, eightDir, "", old)
	_, err = LoadPredicted(&eight)
	require.Error(t, err)
	assert.Equal(t, exitcode.Input, exitcode.Of(err))
	assert.Contains(t, err.Error(), "this run ran 8 ranks")
}
