package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/predict"
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

	b, err := json.Marshal(predictedFile())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, predict.JSONFile), b, 0o644))
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
	f, err := LoadPredicted(dir)
	require.NoError(t, err)
	assert.Nil(t, f, "no predicted.json: no section")
	require.NoError(t, os.WriteFile(filepath.Join(dir, predict.JSONFile), []byte("{not json"), 0o644))
	_, err = LoadPredicted(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), predict.JSONFile)
	require.NoError(t, os.WriteFile(filepath.Join(dir, predict.JSONFile), []byte(`{"ranks": 8, "predictions": []}`), 0o644))
	_, err = LoadPredicted(dir)
	require.ErrorContains(t, err, "no predictions")
}
