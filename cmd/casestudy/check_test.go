package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

const checkStudy = `name: crafted
model: {family: gpt, preset: tiny}
workload: {device: cpu, ranks: 1, warmup_steps: 5, steps: 20, repeats: 3}
baseline: {precision: fp32}
sweep:
  strategy: one-at-a-time
  knobs:
    precision: [fp32, bf16]
`

// writeCheckRun writes a run directory with an fp32 and a bf16 trial (bf16
// 1.9× faster at the same loss) and the given study text in its manifest.
func writeCheckRun(t *testing.T, studyText string) string {
	t.Helper()
	dir := t.TempDir()
	m := store.Manifest{Schema: store.SchemaVersion, RunID: "r1", Study: "crafted", StudyPath: filepath.Join(dir, "gone.yaml"),
		StudyText: studyText, Baseline: map[string]string{"precision": "fp32"},
		Objective: store.Objective{Metric: "throughput", Goal: "max"},
		Workload:  map[string]any{"warmup_steps": 5, "steps": 20, "repeats": 3}}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644))
	var lines []byte
	for i, tr := range []struct {
		id, prec string
		thr, ms  float64
	}{{"a1b2", "fp32", 100, 80}, {"c3d4", "bf16", 190, 42}} {
		rec := store.TrialRecord{Schema: store.SchemaVersion, ID: tr.id, Index: i, Outcome: store.OK,
			Knobs: map[string]string{"precision": tr.prec}, Summary: &store.TrialSummary{SamplesPerS: tr.thr, StepMSMedian: tr.ms, FinalLoss: 5}}
		if tr.prec != "fp32" {
			rec.Changed = []string{"precision"}
		}
		for r := 0; r < 3; r++ {
			rk := store.RankRecord{Rank: 0, WarmupSteps: 5}
			for s := 0; s < 20; s++ {
				rk.Steps = append(rk.Steps, engine.StepMetrics{Step: s, StepMS: tr.ms, Loss: 5})
			}
			rec.Repeats = append(rec.Repeats, store.RepeatRecord{Repeat: r, Outcome: store.OK, SamplesPerS: tr.thr, Ranks: []store.RankRecord{rk}})
		}
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		lines = append(append(lines, b...), '\n')
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "trials.jsonl"), lines, 0o644))
	return dir
}

func TestCheckText(t *testing.T) {
	dir := writeCheckRun(t, checkStudy)
	code, out, stderr := runCLI(t, "check", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "1 finding(s)")
	assert.Contains(t, out, "thresholds from the study text in")
	assert.Contains(t, out, "bf16 autocast was 1.90× faster than fp32 (trials c3d4, a1b2)")
	assert.Contains(t, out, "→ use precision: bf16")
	assert.Contains(t, out, "NOT APPLICABLE")
}

func TestCheckFailOn(t *testing.T) {
	dir := writeCheckRun(t, checkStudy)
	tests := []struct {
		description string
		args        []string
		code        int
		stderr      string
	}{
		{"warning gate trips on the precision finding", []string{"--fail-on", "warning"}, exitcode.Failure, "1 finding(s) at or above warning: [precision]"},
		{"info gate trips too", []string{"--fail-on", "INFO"}, exitcode.Failure, "[precision]"},
		{"error gate passes", []string{"--fail-on", "error"}, 0, ""},
		{"no gate", nil, 0, ""},
		{"unknown severity", []string{"--fail-on", "fatal"}, exitcode.Input, `--fail-on: unknown severity "fatal"`},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"check", dir}, tt.args...)...)
			assert.Equal(t, tt.code, code, stderr)
			if tt.stderr != "" {
				assert.Contains(t, stderr, tt.stderr)
			} else {
				assert.Empty(t, stderr)
			}
		})
	}
}

func TestCheckJSON(t *testing.T) {
	dir := writeCheckRun(t, checkStudy)
	code, out, stderr := runCLI(t, "check", dir, "--json", "--fail-on", "warning")
	assert.Equal(t, exitcode.Failure, code, stderr)
	var rep checkReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, "crafted", rep.Study)
	assert.Equal(t, "warning", rep.FailOn)
	require.Len(t, rep.Results, len(checklist.Rules()))
	assert.Equal(t, 1, rep.Counts.Findings)
	assert.Equal(t, "precision", rep.Results[0].RuleID)
	assert.Equal(t, checklist.Finding, rep.Results[0].Status)
	assert.Equal(t, []string{"c3d4", "a1b2"}, rep.Results[0].Trials)
}

func TestCheckStudyOverrides(t *testing.T) {
	overrides := checkStudy + "checklist:\n  disable: [measurement-hygiene]\n  thresholds:\n    precision: {min_speedup: 3}\n"
	dir := writeCheckRun(t, overrides)
	code, out, stderr := runCLI(t, "check", dir, "--json")
	require.Equal(t, 0, code, stderr)
	var rep checkReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	byID := map[string]checklist.Result{}
	for _, r := range rep.Results {
		byID[r.RuleID] = r
	}
	assert.Equal(t, checklist.Pass, byID["precision"].Status, byID["precision"].Message)
	assert.Equal(t, 3.0, byID["precision"].Thresholds["min_speedup"])
	assert.Equal(t, checklist.NotApplicable, byID["measurement-hygiene"].Status)
	assert.Contains(t, byID["measurement-hygiene"].Message, "disabled")

	// --study replaces the run's study.
	other := filepath.Join(t.TempDir(), "other.yaml")
	require.NoError(t, os.WriteFile(other, []byte(checkStudy+"checklist:\n  thresholds:\n    precision: {min_speedup: 1.5}\n"), 0o644))
	code, out, stderr = runCLI(t, "check", dir, "--study", other)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "thresholds from "+other)
	assert.Contains(t, out, "→ use precision: bf16")
}

func TestCheckBadInput(t *testing.T) {
	typo := writeCheckRun(t, checkStudy+"checklist:\n  thresholds:\n    precison: {min_speedup: 3}\n")
	broken := writeCheckRun(t, "name: [\n")
	tests := []struct {
		description string
		args        []string
		stderr      []string
	}{
		{"no run dir", []string{"check"}, []string{"accepts 1 arg"}},
		{"missing run dir", []string{"check", filepath.Join(t.TempDir(), "none")}, []string{"is not a run directory"}},
		{"unknown rule in the study", []string{"check", typo}, []string{"manifest.json", `unknown rule "precison"`, `did you mean "precision"`}},
		{"study text that does not parse", []string{"check", broken}, []string{"re-reading the study text", "--study FILE"}},
		{"missing --study file", []string{"check", typo, "--study", filepath.Join(t.TempDir(), "nope.yaml")}, []string{"--study", "nope.yaml"}},
		{"checklist takes no argument", []string{"checklist", "x"}, []string{"unknown command"}},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			assert.Equal(t, exitcode.Input, code, stderr)
			assert.Empty(t, stdout)
			for _, s := range tt.stderr {
				assert.Contains(t, stderr, s)
			}
		})
	}
}

func TestChecklistCommand(t *testing.T) {
	code, out, stderr := runCLI(t, "checklist")
	require.Equal(t, 0, code, stderr)
	for _, r := range checklist.Rules() {
		assert.Contains(t, out, r.ID)
	}
	assert.Contains(t, out, "min_speedup=1.1")

	code, out, stderr = runCLI(t, "checklist", "--json")
	require.Equal(t, 0, code, stderr)
	var rules []checklist.Rule
	require.NoError(t, json.Unmarshal([]byte(out), &rules))
	require.Len(t, rules, len(checklist.Rules()))
	assert.Equal(t, "precision", rules[0].ID)
	assert.Equal(t, 23, rules[0].Chapter)
	assert.NotEmpty(t, rules[0].Thresholds)
}

func TestCheckReadsTheRecordedStudyFile(t *testing.T) {
	// results/<study>/<run>/ under a root that also holds studies/x.yaml,
	// recorded as a relative path: check resolves it from the run's root and
	// follows its extends.
	root := t.TempDir()
	parent := checkStudy + "checklist:\n  thresholds:\n    precision: {min_speedup: 3}\n"
	child := "extends: parent.yaml\nname: crafted\n"
	require.NoError(t, os.MkdirAll(filepath.Join(root, "studies"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "studies", "parent.yaml"), []byte(parent), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "studies", "x.yaml"), []byte(child), 0o644))
	src := writeCheckRun(t, child)
	dir := filepath.Join(root, "results", "crafted", "r1")
	require.NoError(t, os.MkdirAll(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Rename(src, dir))
	var m store.Manifest
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	m.StudyPath = filepath.Join("studies", "x.yaml")
	sum := sha256.Sum256([]byte(child))
	m.StudySHA256 = hex.EncodeToString(sum[:])
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644))

	code, out, stderr := runCLI(t, "check", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "thresholds from "+filepath.Join(dir, "..", "..", "..", "studies", "x.yaml"))
	assert.Contains(t, out, "0 finding(s)")

	// Without the file, the recorded text alone cannot resolve extends.
	require.NoError(t, os.Remove(filepath.Join(root, "studies", "parent.yaml")))
	code, _, stderr = runCLI(t, "check", dir)
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "pass --study FILE")
}

// TestStudiesChecklistSections loads every committed study and validates its
// checklist: section against the rule registry, so a renamed rule or threshold
// cannot leave a study's override silently ignored.
func TestStudiesChecklistSections(t *testing.T) {
	root := filepath.Join("..", "..", "studies")
	var files []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".yaml" {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files, "no studies under %s", root)
	for _, f := range files {
		s, err := study.Load(f, study.LoadOptions{})
		require.NoError(t, err, f)
		assert.NoError(t, configOf(s).Validate(), f)
	}
}

// TestCheckFailOnErrorTrips: the error gate passes on a clean run and trips
// on a trial that crashed and on a tainted launch (untrusted-launches).
func TestCheckFailOnErrorTrips(t *testing.T) {
	edit := func(t *testing.T, dir string, f func(recs []store.TrialRecord)) {
		t.Helper()
		recs, err := store.ReadTrials(filepath.Join(dir, "trials.jsonl"))
		require.NoError(t, err)
		f(recs)
		var lines []byte
		for _, r := range recs {
			b, err := json.Marshal(r)
			require.NoError(t, err)
			lines = append(append(lines, b...), '\n')
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "trials.jsonl"), lines, 0o644))
	}
	clean := writeCheckRun(t, checkStudy)
	crashed := writeCheckRun(t, checkStudy)
	edit(t, crashed, func(recs []store.TrialRecord) {
		recs[1].Outcome, recs[1].Error, recs[1].Repeats, recs[1].Summary = store.Crashed, "rank 0 was killed by SIGSEGV", nil, nil
	})
	tainted := writeCheckRun(t, checkStudy)
	edit(t, tainted, func(recs []store.TrialRecord) { recs[0].Repeats[1].Tainted = "GPU 0 throttled" })

	code, _, stderr := runCLI(t, "check", clean, "--fail-on", "error")
	assert.Equal(t, 0, code, stderr)
	for name, dir := range map[string]string{"crashed": crashed, "tainted": tainted} {
		code, out, stderr := runCLI(t, "check", dir, "--fail-on", "error")
		assert.Equal(t, exitcode.Failure, code, "%s: %s", name, out)
		assert.Contains(t, stderr, "at or above error: [untrusted-launches]", name)
	}
}
