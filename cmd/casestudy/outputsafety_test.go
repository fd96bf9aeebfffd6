package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
)

// oneRankRun writes a one-rank run of two measured trials (what `run
// --predict N` records) without running anything: predict's input.
func oneRankRun(t *testing.T) string {
	t.Helper()
	ready := func(v float64) *float64 { return &v }
	trial := func(id, overlap string) *store.TrialRecord {
		var steps []engine.StepMetrics
		for i := 0; i < 4; i++ {
			steps = append(steps, engine.StepMetrics{Step: i, StepMS: 70, ForwardMS: 20, BackwardMS: 40, TailMS: 1, OptimizerMS: 5,
				Samples: 8, Tokens: 8 * 64, Buckets: []engine.BucketMetrics{
					{Op: "all_reduce", Bytes: 4 << 20, MS: 0.1, ReadyMS: ready(20)},
					{Op: "all_reduce", Bytes: 8 << 20, MS: 0.1, ReadyMS: ready(40)}}})
		}
		return &store.TrialRecord{Schema: store.SchemaVersion, ID: id, Knobs: map[string]string{"ddp.overlap": overlap},
			Changed: []string{"ddp.overlap"}, Outcome: store.OK, FailedRank: -1, Attempts: 1, Started: time.Now(), Finished: time.Now(),
			Repeats: []store.RepeatRecord{{Repeat: 0, Outcome: store.OK, SamplesPerS: 8 / 70.0 * 1e3,
				Ranks: []store.RankRecord{{Rank: 0, Steps: steps}}}}}
	}
	m := &store.Manifest{Schema: store.SchemaVersion, RunID: "20260101T000000Z-one111", Study: "s", Created: time.Now(),
		Objective: store.Objective{Metric: "samples_per_s", Goal: "maximize"},
		Workload:  map[string]any{"device": "cuda", "device_resolved": "cuda", "gpus": 1, "ranks": 1, "world_of_one": true},
		Plan: []store.PlannedTrial{{ID: "aaaa0001", Knobs: map[string]string{"ddp.overlap": "true"}},
			{ID: "aaaa0002", Index: 1, Knobs: map[string]string{"ddp.overlap": "false"}}}}
	w, err := store.Create(t.TempDir(), "s", m.RunID, m)
	require.NoError(t, err)
	require.NoError(t, w.Append(trial("aaaa0001", "true")))
	require.NoError(t, w.Append(trial("aaaa0002", "false")))
	require.NoError(t, w.Close())
	return w.Dir
}

// snapshot is every file of dir by name.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			out[e.Name()] = string(b)
		}
	}
	return out
}

// `predict A --out B`, B another run's directory, wrote predicted.* into B,
// whose report then showed A's predictions as its own: refused (exit 2
// naming --out), B untouched; a new folder and A itself are fine, and a
// predicted.json of another run found in a run directory fails its report
// with exit 2.
func TestPredictOutRefusesAnotherRun(t *testing.T) {
	one := oneRankRun(t)
	other := copyRun(t, "runs/bert-grid")
	before := snapshot(t, other)
	model := []string{"--gpus", "2", "--topology", "pcie-gen4-8"}

	code, _, stderr := runCLI(t, append([]string{"predict", one, "--out", other}, model...)...)
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, "--out "+other+" is the directory of the run 20261130T020000Z-aaaaaa")
	assert.Equal(t, before, snapshot(t, other), "nothing written into the other run")

	fresh := filepath.Join(t.TempDir(), "pred")
	code, _, stderr = runCLI(t, append([]string{"predict", one, "--out", fresh}, model...)...)
	require.Equal(t, 0, code, stderr)
	assert.FileExists(t, filepath.Join(fresh, "predicted.json"))
	code, _, stderr = runCLI(t, append([]string{"predict", one}, model...)...)
	require.Equal(t, 0, code, stderr)
	js, err := os.ReadFile(filepath.Join(one, "predicted.json"))
	require.NoError(t, err)
	assert.Contains(t, string(js), `"run_id": "20260101T000000Z-one111"`)
	out := t.TempDir()
	code, _, stderr = runCLI(t, "report", one, "--out", out, "--format", "md")
	require.Equal(t, 0, code, stderr)
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "Predicted trials on 2 ranks")

	// What the unchecked --out left behind: the other run's report refuses it.
	require.NoError(t, os.WriteFile(filepath.Join(other, "predicted.json"), js, 0o644))
	code, _, stderr = runCLI(t, "report", other, "--out", t.TempDir(), "--format", "md")
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, filepath.Join(other, "predicted.json")+": it was predicted from the run 20260101T000000Z-one111")

	// Cut short (a kill while a plain write was under way): exit 2, naming the file.
	require.NoError(t, os.WriteFile(filepath.Join(one, "predicted.json"), js[:len(js)/2], 0o644))
	code, _, stderr = runCLI(t, "report", one, "--out", t.TempDir(), "--format", "md")
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, filepath.Join(one, "predicted.json")+": not a prediction file")
	assert.Contains(t, stderr, "casestudy predict "+one)
}

// `report A --out B`, B another finished run, replaced B's reports with A's;
// --out a regular file failed with exit 3 "not a directory"; --out A itself
// skipped the "not rewritten silently" check. Each is exit 2 naming --out.
func TestReportOutRefusesAnotherRunAndFiles(t *testing.T) {
	a := copyRun(t, "runs/bert-grid")
	b := copyRun(t, "runs/bert-grid-rerun")
	code, _, stderr := runCLI(t, "report", b, "--format", "md,json")
	require.Equal(t, 0, code, stderr)
	before := snapshot(t, b)

	code, _, stderr = runCLI(t, "report", a, "--out", b, "--format", "md,json")
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, "--out "+b+" is the directory of the run 20261201T020000Z-bbbbbb")
	code, _, stderr = runCLI(t, "report", a, "--out", b, "--force")
	assert.Equal(t, exitcode.Input, code, "--force replaces a run's own reports only: %s", stderr)
	assert.Equal(t, before, snapshot(t, b), "the other run's reports are untouched")

	file := filepath.Join(t.TempDir(), "afile")
	require.NoError(t, os.WriteFile(file, []byte("keep"), 0o644))
	code, _, stderr = runCLI(t, "report", a, "--out", file)
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, "--out "+file+" is a file, not a folder")

	code, _, stderr = runCLI(t, "report", a, "--format", "md")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = runCLI(t, "report", a, "--out", a, "--format", "md")
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, "already has report.md")
	code, _, stderr = runCLI(t, "report", a, "--out", a, "--format", "md", "--force")
	assert.Equal(t, 0, code, stderr)
}

// export, compare and baseline -o replaced a run's summary.json, report.*
// or predicted.* with their own output (exit 0), and -o a folder failed
// with exit 3 "renameat ... file exists": exit 2 naming the flag, nothing
// replaced.
func TestOutputFlagRefusesRunReportsAndFolders(t *testing.T) {
	a := copyRun(t, "runs/bert-grid")
	b := copyRun(t, "runs/bert-grid-rerun")
	for _, name := range []string{"summary.json", "report.md", "report.html", "predicted.json", "predicted.md"} {
		require.NoError(t, os.WriteFile(filepath.Join(b, name), []byte("the run's own "+name), 0o644))
	}
	before := snapshot(t, b)
	folder := t.TempDir()
	for _, name := range []string{"summary.json", "report.md", "report.html", "predicted.json", "predicted.md"} {
		for _, args := range [][]string{
			{"export", a, "--format", "csv", "-o", filepath.Join(b, name)},
			{"export", a, "-o", filepath.Join(b, name)},
			{"compare", a, b, "-o", filepath.Join(b, name)},
			{"baseline", a, "-o", filepath.Join(b, name)},
			{"history", filepath.Dir(a), "-o", filepath.Join(b, name)},
		} {
			code, _, stderr := runCLI(t, args...)
			assert.Equal(t, exitcode.Input, code, "%v: %s", args, stderr)
			assert.Contains(t, stderr, "--output (-o) "+filepath.Join(b, name)+" is "+name+" of the run directory")
		}
	}
	assert.Equal(t, before, snapshot(t, b))
	for _, args := range [][]string{
		{"export", a, "-o", folder}, {"compare", a, b, "-o", folder}, {"baseline", a, "-o", folder},
		{"history", filepath.Dir(a), "-o", folder},
	} {
		code, _, stderr := runCLI(t, args...)
		assert.Equal(t, exitcode.Input, code, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "--output (-o) "+folder+" is a folder: give the path of a file")
	}
	entries, err := os.ReadDir(folder)
	require.NoError(t, err)
	assert.Empty(t, entries, "no temporary file left in the folder")
}

// baseline of an incomplete run names the resume command `run --help`
// gives (--resume RUN_DIR, not STUDY --resume).
func TestBaselineIncompleteSuggestsResumeRunDir(t *testing.T) {
	dir := copyRun(t, "runs/bert-grid")
	b, err := os.ReadFile(filepath.Join(dir, "trials.jsonl"))
	require.NoError(t, err)
	lines := strings.SplitAfter(string(b), "\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "trials.jsonl"), []byte(strings.Join(lines[1:], "")), 0o644))
	code, _, stderr := runCLI(t, "baseline", dir, "-o", filepath.Join(t.TempDir(), "b.json"))
	assert.Equal(t, exitcode.Failure, code, stderr)
	assert.Contains(t, stderr, "casestudy run --resume "+dir+")")
	assert.NotContains(t, stderr, "STUDY --resume")
}

// export of a run with no finished trial exited 0 with no benchmark line:
// benchfmt is refused (exit 1, as baseline refuses a baseline that holds
// nothing; no file written), CSV (a row per trial with its outcome and
// error) is written and says on stderr that no trial finished.
func TestExportNoFinishedTrial(t *testing.T) {
	dir := fixture("runs/all-failed")
	out := filepath.Join(t.TempDir(), "old.txt")
	code, stdout, stderr := runCLI(t, "export", dir, "-o", out)
	assert.Equal(t, exitcode.Failure, code, stderr)
	assert.Contains(t, stderr, "has no finished trial")
	assert.Contains(t, stderr, "nothing written")
	assert.Empty(t, stdout)
	assert.NoFileExists(t, out)

	code, stdout, stderr = runCLI(t, "export", dir, "--format", "csv")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "trial,label,outcome")
	assert.Regexp(t, `(\d+) of (\d+) trials did not finish: their rows hold the outcome and error, no measurement`, stderr)
}
