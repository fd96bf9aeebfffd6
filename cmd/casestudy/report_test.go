package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
)

// fixtures are the crafted run directories of package report.
func fixture(name string) string { return filepath.Join("..", "..", "report", "testdata", name) }

func TestReportCommand(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "report", fixture("runs/bert-grid"), "--out", out)
	require.Equal(t, 0, code, stderr)
	for _, f := range []string{"report.html", "report.md", "summary.json"} {
		assert.Contains(t, stdout, filepath.Join(out, f))
		assert.FileExists(t, filepath.Join(out, f))
	}
	s, err := report.ReadSummary(filepath.Join(out, "summary.json"))
	require.NoError(t, err)
	assert.NotEmpty(t, s.Findings, "report runs the checklist")

	out2 := t.TempDir()
	code, _, stderr = runCLI(t, "report", fixture("runs/all-failed"), "--out", out2, "--format", "md")
	require.Equal(t, 0, code, stderr)
	md, err := os.ReadFile(filepath.Join(out2, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "No trial finished")
	assert.NoFileExists(t, filepath.Join(out2, "report.html"))
}

func TestCommandsBadInput(t *testing.T) {
	run := fixture("runs/bert-grid")
	tests := []struct {
		description string
		args        []string
		want        string
	}{
		{"report: no run dir", []string{"report"}, "accepts 1 arg"},
		{"report: missing run dir", []string{"report", "/nonexistent/run"}, "not a run directory"},
		{"report: unknown format", []string{"report", run, "--format", "pdf"}, `unknown report format "pdf"`},
		{"compare: one argument, no compare.baseline", []string{"compare", run}, "sets no compare.baseline"},
		{"compare: three arguments", []string{"compare", run, run, run}, "accepts between 1 and 2 arg"},
		{"compare: bad threshold", []string{"compare", run, run, "--threshold", "lots"}, "--threshold"},
		{"compare: bad format", []string{"compare", run, run, "--format", "xml"}, "--format"},
		{"compare: missing baseline", []string{"compare", "/nonexistent/baseline.json", run}, "OLD"},
		{"compare: not a baseline file", []string{"compare", filepath.Join(run, "manifest.json"), run}, "not a casestudy summary or baseline file"},
		{"export: bad format", []string{"export", run, "--format", "xlsx"}, "--format"},
		{"history: missing dir", []string{"history", "/nonexistent/results"}, "results/<study>"},
		{"history: bad format", []string{"history", fixture("history/bert-grid"), "--format", "pdf"}, "--format"},
		{"baseline: no -o", []string{"baseline", run}, "output"},
		{"doctor: an argument", []string{"doctor", "extra"}, `unknown command "extra"`},
		{"run: two studies", []string{"run", "a.yaml", "b.yaml"}, "accepts at most 1 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			code, _, stderr := runCLI(t, tt.args...)
			assert.Equal(t, 2, code, stderr)
			assert.Contains(t, stderr, tt.want)
		})
	}
}

// TestOutputNotWritable: an output that cannot be written is the
// environment's problem (exit 3) in every command that writes one.
func TestOutputNotWritable(t *testing.T) {
	run := fixture("runs/bert-grid")
	missing := filepath.Join(t.TempDir(), "no", "such", "folder", "out")
	blocked := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocked, nil, 0o644))
	for _, args := range [][]string{
		{"report", run, "--out", filepath.Join(blocked, "reports")},
		{"compare", run, run, "-o", missing},
		{"export", run, "-o", missing},
		{"history", fixture("history/bert-grid"), "-o", missing},
		{"baseline", run, "-o", missing},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, _, stderr := runCLI(t, args...)
			assert.Equal(t, exitcode.Environment, code, stderr)
			assert.Regexp(t, "(no such file or directory|not a directory)", stderr)
		})
	}
}

func TestCompareExitStatus(t *testing.T) {
	base := fixture("runs/bert-grid")
	tests := []struct {
		description string
		args        []string
		code        int
		want        string
	}{
		// the re-run's noisy precision=bf16 (0.96x [0.90, 1.03] at 6 launches a side) cannot be shown no slower than 0.95x
		{"re-run: inconclusive, fails closed", []string{base, fixture("runs/bert-grid-rerun")}, 4, "INCONCLUSIVE: 1 of 5 trials could not be judged; undecided: precision=bf16 (t-37eef005)"},
		{"re-run: --inconclusive=pass", []string{base, fixture("runs/bert-grid-rerun"), "--inconclusive=pass"}, 0, "INCONCLUSIVE"},
		{"slower: regression", []string{base, fixture("runs/bert-grid-slower")}, 1, "REGRESSION: 1 trial slower by more than 5% or failing: precision=bf16, micro_batch=32"},
		{"slower under a 20% threshold", []string{base, fixture("runs/bert-grid-slower"), "--threshold", "20%"}, 0, "PASS: no trial slower by more than 20%"},
		{"bad --inconclusive", []string{base, base, "--inconclusive=maybe"}, 2, ""},
		{"markdown", []string{base, fixture("runs/bert-grid-slower"), "--format", "md"}, 1, "| REGRESSION 0.880× \\[0.868, 0.891\\], slower by more than 5% |"},
		{"html", []string{base, fixture("runs/bert-grid-slower"), "--format", "html"}, 1, "<!DOCTYPE html>"},
		{"json", []string{base, fixture("runs/bert-grid-slower"), "--json"}, 1, `"regressions": [`},
		{"another measurement: not comparable", []string{base, fixture("runs/gpt-pipeline")}, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"compare"}, tt.args...)...)
			assert.Equal(t, tt.code, code, stderr)
			assert.Contains(t, stdout, tt.want)
			if tt.code == 1 {
				assert.Contains(t, stderr, "REGRESSION")
			}
			if tt.code == 2 && tt.want == "" && strings.Contains(stderr, "--inconclusive") {
				return
			}
			if tt.code == 2 {
				assert.Contains(t, stderr, "not comparable")
				assert.Contains(t, stderr, "the measurement differs (OLD 5 steps after 3 warm-up, NEW 24 steps after 3 warm-up)")
			}
		})
	}
}

// TestCompareGateOnRealRun: a real H200 run (report/testdata/replay, 2
// launches a trial) against itself is inconclusive (exit 4: the eager
// baseline's two launches differ by 3%, too much to show it no slower than
// 0.95x at 2 degrees of freedom); the same run with its best trial's
// launches 30% slower exits 1 naming that trial; a run that shares no trial
// exits 2.
func TestCompareGateOnRealRun(t *testing.T) {
	orig := fixture("replay/h200-gpt-graphs")
	slow := t.TempDir()
	man, err := os.ReadFile(filepath.Join(orig, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(slow, "manifest.json"), man, 0o644))
	recs, err := store.ReadTrials(filepath.Join(orig, "trials.jsonl"))
	require.NoError(t, err)
	var b bytes.Buffer
	for _, r := range recs {
		if r.ID == "b714f9b7" { // CUDA Graphs, the best trial
			for i := range r.Repeats {
				r.Repeats[i].SamplesPerS *= 0.7
				r.Repeats[i].TokensPerS *= 0.7
			}
		}
		line, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(append(line, '\n'))
	}
	require.NoError(t, os.WriteFile(filepath.Join(slow, "trials.jsonl"), b.Bytes(), 0o644))

	code, stdout, stderr := runCLI(t, "compare", orig, orig)
	assert.Equal(t, 4, code, stderr)
	assert.Contains(t, stdout, "INCONCLUSIVE: 1 of 4 trials could not be judged; undecided: baseline (d69fcfe4)")
	assert.Contains(t, stdout, "2 launches a side: spread from 2 degrees of freedom")

	code, stdout, stderr = runCLI(t, "compare", orig, slow, "--json")
	assert.Equal(t, 1, code, stderr)
	var c report.Comparison
	require.NoError(t, json.Unmarshal([]byte(stdout), &c))
	assert.Equal(t, []string{"b714f9b7"}, c.Regressions)

	other := t.TempDir() // the same study with other trials (other IDs)
	renamed := strings.NewReplacer("278d8b33", "11111111", "74bfa12f", "22222222", "d69fcfe4", "33333333", "b714f9b7", "44444444")
	require.NoError(t, os.WriteFile(filepath.Join(other, "manifest.json"), []byte(renamed.Replace(string(man))), 0o644))
	trials, err := os.ReadFile(filepath.Join(orig, "trials.jsonl"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(other, "trials.jsonl"), []byte(renamed.Replace(string(trials))), 0o644))
	code, _, stderr = runCLI(t, "compare", orig, other)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "no trial in common")
}

func TestBaselineThenCompare(t *testing.T) {
	file := filepath.Join(t.TempDir(), "baseline.json")
	code, _, stderr := runCLI(t, "baseline", fixture("runs/bert-grid"), "-o", file)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "5 of 7 trials with samples")
	assert.NotContains(t, stderr, "fewer than 3 launches")
	s, err := report.ReadSummary(file)
	require.NoError(t, err)
	assert.Equal(t, report.KindBaseline, s.Kind)

	code, stdout, _ := runCLI(t, "compare", file, fixture("runs/bert-grid-slower"), "-o", filepath.Join(t.TempDir(), "cmp.txt"))
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout, "-o writes the file, not stdout")

	// two launches a trial: written, with a warning naming the trials
	code, _, stderr = runCLI(t, "baseline", fixture("replay/h200-gpt-graphs"), "-o", filepath.Join(t.TempDir(), "r.json"))
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "warning: 4 trial(s) hold fewer than 3 launches (precision=fp32 (278d8b33): 2")

	code, _, stderr = runCLI(t, "baseline", fixture("runs/all-failed"), "-o", filepath.Join(t.TempDir(), "b.json"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no trial that finished")
}

func TestExportCommand(t *testing.T) {
	code, stdout, stderr := runCLI(t, "export", fixture("runs/bert-grid"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "2 of 7 trials did not finish")
	r := benchfmt.NewReader(strings.NewReader(stdout), "stdout")
	n := 0
	for r.Scan() {
		if _, ok := r.Result().(*benchfmt.Result); ok {
			n++
		}
	}
	require.NoError(t, r.Err())
	assert.Equal(t, 5*6, n, "5 ok trials × 6 repeats")

	file := filepath.Join(t.TempDir(), "x.csv")
	code, _, stderr = runCLI(t, "export", fixture("runs/bert-grid"), "--format", "csv", "-o", file)
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, 8, strings.Count(string(b), "\n"))
}

func TestHistoryCommand(t *testing.T) {
	code, stdout, stderr := runCLI(t, "history", fixture("history/bert-grid"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "over 3 runs")
	assert.Contains(t, stdout, "0.91× [0.90, 0.92] slower by more than 5%")
	file := filepath.Join(t.TempDir(), "h.html")
	code, _, stderr = runCLI(t, "history", fixture("history/bert-grid"), "--format", "html", "-o", file)
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(b), "<svg"))
}

// editedRun writes a copy of the run directory orig whose trials edit
// rewrites (nil drops the trial) and returns its path.
func editedRun(t *testing.T, orig string, edit func(*store.TrialRecord) *store.TrialRecord) string {
	t.Helper()
	dir := t.TempDir()
	man, err := os.ReadFile(filepath.Join(orig, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), man, 0o644))
	recs, err := store.ReadTrials(filepath.Join(orig, "trials.jsonl"))
	require.NoError(t, err)
	var b bytes.Buffer
	for i := range recs {
		r := edit(&recs[i])
		if r == nil {
			continue
		}
		line, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(append(line, '\n'))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "trials.jsonl"), b.Bytes(), 0o644))
	return dir
}

// TestCompareFailsClosedCommand: the gate's exit status when it cannot see
// (each exited 0 before):
//   - OLD's launches all tainted: compare exits 4 naming the trials; baseline
//     of such a run counts 0 trials with samples and fails (it said "5 of 7");
//     with one trial tainted it counts 4 and warns;
//   - NEW's summary holding one of OLD's trials: exit 4 naming the others, 0
//     only with --inconclusive=pass;
//   - --history with copies of one run: the copies are left out, and said so.
func TestCompareFailsClosedCommand(t *testing.T) {
	base, rerun := fixture("runs/bert-grid"), fixture("runs/bert-grid-rerun")
	taint := func(only string) func(*store.TrialRecord) *store.TrialRecord {
		return func(r *store.TrialRecord) *store.TrialRecord {
			for i := range r.Repeats {
				if only == "" || r.ID == only {
					r.Repeats[i].Tainted = "another process on the GPU"
				}
			}
			return r
		}
	}
	tainted := editedRun(t, base, taint(""))
	code, stdout, stderr := runCLI(t, "compare", tainted, rerun)
	assert.Equal(t, 4, code, stderr)
	assert.Contains(t, stdout, "INCONCLUSIVE: 5 of 5 trials could not be judged; no clean launch in OLD: baseline (t-72f0c541), micro_batch=32 (t-b3cb018b)")
	code, _, stderr = runCLI(t, "baseline", tainted, "-o", filepath.Join(t.TempDir(), "b.json"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no trial that finished with a clean launch")
	code, _, stderr = runCLI(t, "baseline", editedRun(t, base, taint("t-b3cb018b")), "-o", filepath.Join(t.TempDir(), "b.json"))
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "4 of 7 trials with samples")
	assert.Contains(t, stderr, "warning: 1 trial(s) finished without a clean launch (every launch tainted or without the metric: micro_batch=32 (t-b3cb018b))")

	// a summary file of NEW cut down to one trial (a run directory that
	// stopped early records the rest as not_run: a regression already)
	cut, err := report.LoadSide(rerun)
	require.NoError(t, err)
	cut.Trials = cut.Trials[:1]
	var buf bytes.Buffer
	require.NoError(t, report.WriteJSON(&buf, cut))
	one := filepath.Join(t.TempDir(), "one.json")
	require.NoError(t, os.WriteFile(one, buf.Bytes(), 0o644))
	code, stdout, stderr = runCLI(t, "compare", base, one)
	assert.Equal(t, 4, code, stderr)
	assert.Contains(t, stdout, "INCONCLUSIVE: 4 trials that finished in OLD are not in NEW: micro_batch=32 (t-b3cb018b)")
	code, _, stderr = runCLI(t, "compare", base, one, "--inconclusive=pass")
	assert.Equal(t, 0, code, stderr)

	hist := t.TempDir()
	for _, name := range []string{"a.json", "b.json", "c.json"} {
		code, _, stderr = runCLI(t, "baseline", rerun, "-o", filepath.Join(hist, name))
		require.Equal(t, 0, code, stderr)
	}
	_, stdout, _ = runCLI(t, "compare", base, base, "--history", hist)
	assert.Contains(t, stdout, "left out 2 entries (a run read already, by run ID): b.json (= a.json), c.json (= a.json)")
}

// TestCompareThresholdTheStricter: with both runs recording a study
// threshold, the gate uses the stricter, so a NEW run that loosens its own
// study's threshold does not loosen the gate that judges it.
func TestCompareThresholdTheStricter(t *testing.T) {
	write := func(src string, threshold float64) string {
		s, err := report.LoadSide(fixture(src))
		require.NoError(t, err)
		s.CompareThreshold = threshold
		var buf bytes.Buffer
		require.NoError(t, report.WriteJSON(&buf, s))
		p := filepath.Join(t.TempDir(), "s.json")
		require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
		return p
	}
	threshold := func(old, new string) float64 {
		_, stdout, stderr := runCLI(t, "compare", old, new, "--json")
		var c struct {
			Threshold float64 `json:"threshold"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &c), stderr)
		return c.Threshold
	}
	strict, loose := write("runs/bert-grid", 0.02), write("runs/bert-grid-rerun", 0.5)
	assert.Equal(t, 0.02, threshold(strict, loose))
	assert.Equal(t, 0.02, threshold(write("runs/bert-grid", 0.5), write("runs/bert-grid-rerun", 0.02)))
	assert.Equal(t, 0.5, threshold(write("runs/bert-grid", 0), loose), "OLD records none: NEW's")
}

// TestCompareNewTaintedIsNoRegression: NEW's launches all tainted (a
// throttled GPU, another process on it): the trials ran, nothing says how
// fast, so the gate is inconclusive (exit 4), not a regression (exit 1).
func TestCompareNewTaintedIsNoRegression(t *testing.T) {
	base, rerun := fixture("runs/bert-grid"), fixture("runs/bert-grid-rerun")
	tainted := editedRun(t, rerun, func(r *store.TrialRecord) *store.TrialRecord {
		for i := range r.Repeats {
			r.Repeats[i].Tainted = "another process on the GPU"
		}
		return r
	})
	code, stdout, stderr := runCLI(t, "compare", base, tainted)
	assert.Equal(t, 4, code, stderr)
	assert.NotContains(t, stdout, "REGRESSION:")
	assert.Contains(t, stdout, "finished in NEW without a clean launch")
	assert.Contains(t, stdout, "INCONCLUSIVE: 5 of 5 trials could not be judged; no clean launch in NEW: baseline (t-72f0c541)")
	assert.Contains(t, stdout, "Rerun NEW where its launches are clean")
	assert.NotContains(t, stdout, "Rerun with more launches a side")
}

// TestIncompleteBaselineFailsClosed: a run that stopped before some planned
// trials (not_run) gives no baseline (exit 1, nothing written, a committed
// file left as it was), and as OLD of compare it leaves those trials
// undecided (exit 4), where it passed their regressions before.
func TestIncompleteBaselineFailsClosed(t *testing.T) {
	base, rerun := fixture("runs/bert-grid"), fixture("runs/bert-grid-rerun")
	kept := 0
	partial := editedRun(t, base, func(r *store.TrialRecord) *store.TrialRecord {
		if kept++; kept > 3 {
			return nil // as if the run stopped after its third trial
		}
		return r
	})
	out := filepath.Join(t.TempDir(), "committed.baseline.json")
	require.NoError(t, os.WriteFile(out, []byte("the committed baseline\n"), 0o644))
	code, _, stderr := runCLI(t, "baseline", partial, "-o", out)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "planned trial(s)")
	assert.Contains(t, stderr, "not_run")
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "the committed baseline\n", string(got), "nothing written")

	code, stdout, stderr := runCLI(t, "compare", partial, rerun)
	assert.Equal(t, 4, code, stderr)
	assert.Contains(t, stdout, "not measured in OLD: ")
	assert.Contains(t, stdout, "Compare against a complete run")

	code, _, stderr = runCLI(t, "baseline", fixture("runs/all-failed"), "-o", out)
	assert.Equal(t, 1, code, stderr)
	got, err = os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "the committed baseline\n", string(got), "a failed baseline leaves the file as it was")
}
