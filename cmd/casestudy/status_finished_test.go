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

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/store"
)

// copyRunDir copies a fixture run (manifest and trials) into a temp dir,
// editing each record with edit (nil: as is).
func copyRunDir(t *testing.T, src string, edit func(*store.TrialRecord)) string {
	t.Helper()
	run, err := store.ReadRun(src)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	mb, err := json.Marshal(run.Manifest)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), mb, 0o644))
	var lines []string
	for i := range run.Trials {
		if edit != nil {
			edit(&run.Trials[i])
		}
		b, err := json.Marshal(run.Trials[i])
		require.NoError(t, err)
		lines = append(lines, string(b))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "trials.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return dir
}

// TestStatusFinishedCopy: the real H100 BERT run, copied without its logs:
// the launches are counted from the records (40 ran), not "0 of 120", and
// the run is finished.
func TestStatusFinishedCopy(t *testing.T) {
	dir := copyRunDir(t, fixture("h100/bert"), nil)
	code, out, stderr := runCLI(t, "status", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "launches: 40 of 40 started")
	assert.Contains(t, out, "finished; report with:")
	assert.NotContains(t, out, "of 120")

	// with its reports written, status points at them
	code, _, stderr = runCLI(t, "report", dir)
	require.Equal(t, 0, code, stderr)
	_, out, _ = runCLI(t, "status", dir)
	assert.Contains(t, out, "finished; reports: "+filepath.Join(absPath(dir), "report.html"))
}

// TestStatusInterrupted: after Ctrl-C the records say interrupted: status
// says so and prints the resume command, never "finished".
func TestStatusInterrupted(t *testing.T) {
	dir := copyRunDir(t, fixture("h100/bert"), func(r *store.TrialRecord) {
		if r.Outcome == store.OK && r.Knobs["micro_batch"] == "64" {
			r.Outcome = store.Interrupted
		}
	})
	code, out, stderr := runCLI(t, "status", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "interrupted (1 trial(s)); resume with: ")
	assert.Contains(t, out, "--resume "+absPath(dir))
	assert.NotContains(t, out, "finished")
}

// TestReportRefusesRewrite: `report RUN` on a run that has its reports
// refuses (exit 2) and says what to do; --force replaces them, --out writes
// elsewhere and leaves them alone.
func TestReportRefusesRewrite(t *testing.T) {
	dir := copyRunDir(t, fixture("h100/bert"), nil)
	code, _, stderr := runCLI(t, "report", dir, "--format", "md")
	require.Equal(t, 0, code, stderr)
	md := filepath.Join(dir, "report.md")
	before, err := os.ReadFile(md)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(md, append(before, "kept"...), 0o644))

	code, _, stderr = runCLI(t, "report", dir)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "already has report.md")
	assert.Contains(t, stderr, "--out DIR")
	assert.Contains(t, stderr, "--force")
	got, _ := os.ReadFile(md)
	assert.True(t, strings.HasSuffix(string(got), "kept"), "left alone")

	out := t.TempDir()
	code, _, stderr = runCLI(t, "report", dir, "--out", out)
	require.Equal(t, 0, code, stderr)
	assert.FileExists(t, filepath.Join(out, "report.html"))
	got, _ = os.ReadFile(md)
	assert.True(t, strings.HasSuffix(string(got), "kept"), "--out leaves the run's reports alone")

	code, _, stderr = runCLI(t, "report", dir, "--force")
	require.Equal(t, 0, code, stderr)
	got, _ = os.ReadFile(md)
	assert.Equal(t, string(before), string(got), "--force rewrites")
}

// TestDoctorBusyHost: a load of 3.6 on 2 cores is a busy host; 0.3 is not.
func TestDoctorBusyHost(t *testing.T) {
	m := fakeMachine()
	m.load = func() (float64, error) { return 3.6, nil }
	var buf bytes.Buffer
	printDoctor(&buf, diagnose(m, "", "results"))
	assert.Contains(t, buf.String(), "MISS  load      busy host: load average 3.6 over the last minute on 2 cores")
	assert.Contains(t, buf.String(), "the host is busy now, so measurements will swing")
	m.load = func() (float64, error) { return 0.3, nil }
	buf.Reset()
	printDoctor(&buf, diagnose(m, "", "results"))
	assert.Contains(t, buf.String(), "ok    load      0.3 over the last minute on 2 cores")
	assert.False(t, isBusy(10, 64))
	assert.True(t, isBusy(40, 64))
}

// TestCompareStudyBaseline: `compare NEW` reads OLD from NEW's study's
// compare.baseline, relative to the study file.
func TestCompareStudyBaseline(t *testing.T) {
	studies := filepath.Join(t.TempDir(), "studies")
	require.NoError(t, os.MkdirAll(studies, 0o755))
	dir := copyRunDir(t, fixture("h100/bert"), nil)
	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	run.Manifest.StudyPath = filepath.Join(studies, "bert.yaml")
	run.Manifest.StudyText = strings.Replace(run.Manifest.StudyText, "compare: {threshold: 5%}", "compare: {threshold: 5%, baseline: bert.baseline.json}", 1)
	require.Contains(t, run.Manifest.StudyText, "baseline: bert.baseline.json")
	mb, err := json.Marshal(run.Manifest)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), mb, 0o644))
	code, _, stderr := runCLI(t, "baseline", dir, "-o", filepath.Join(studies, "bert.baseline.json"))
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(filepath.Join(studies, "bert.baseline.json"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "launch_detail", "a baseline file keeps launch values, not every step")
	assert.Less(t, len(b), 200_000)
	// The run against its own baseline: the gate passes every trial it can
	// judge; the eager baseline's two launches leave one undecided (exit 4),
	// which --inconclusive=pass maps to 0. What is tested is that OLD comes
	// from the study's compare.baseline.
	code, out, stderr := runCLI(t, "compare", dir)
	assert.Equal(t, 4, code, stderr)
	code, out, stderr = runCLI(t, "compare", "--inconclusive=pass", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "old: "+filepath.Join(studies, "bert.baseline.json"))

	// A run that recorded the resolved path (compare_baseline: absolute,
	// an extended study's included) uses it, whatever its study text says
	// and whichever folder compare runs from.
	elsewhere := filepath.Join(t.TempDir(), "nightly.baseline.json")
	require.NoError(t, os.Rename(filepath.Join(studies, "bert.baseline.json"), elsewhere))
	run.Manifest.CompareBaseline = elsewhere
	run.Manifest.StudyText = strings.Replace(run.Manifest.StudyText, ", baseline: bert.baseline.json", "", 1)
	mb, err = json.Marshal(run.Manifest)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), mb, 0o644))
	code, out, stderr = runCLI(t, "compare", "--inconclusive=pass", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "old: "+elsewhere)

	// Recorded on another machine (the path is not here) and the study's text
	// does not name one (an extended file did): a clear error, exit 2.
	run.Manifest.CompareBaseline = "/elsewhere/studies/bert.baseline.json"
	mb, err = json.Marshal(run.Manifest)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), mb, 0o644))
	code, _, stderr = runCLI(t, "compare", dir)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "was /elsewhere/studies/bert.baseline.json where the run was made, not on this machine")
}

// TestDoctorCuDNNCopy: a cuDNN loaded in another version than torch's is a
// MISS with the loaded path and the fix; the same version is ok; none loaded
// says nothing.
func TestDoctorCuDNNCopy(t *testing.T) {
	m := fakeMachine()
	bi := engine.BuildInfo{ABI: binding.ABIVersion, Torch: "2.11.0", CuDNN: "91900", CuDNNRuntime: "91300",
		Libraries: map[string]string{"libcudnn.so.9": "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"}}
	m.engine = func(string) (string, engine.BuildInfo, error) { return "/e/libcasestudy_engine.so", bi, nil }
	var buf bytes.Buffer
	printDoctor(&buf, diagnose(m, "", "results"))
	assert.Contains(t, buf.String(), "MISS  cudnn copy loaded cuDNN 91300 from /usr/lib/x86_64-linux-gnu/libcudnn.so.9, torch was built with 91900")
	assert.Contains(t, buf.String(), "check LD_LIBRARY_PATH for another libcudnn.so.9")
	assert.Contains(t, buf.String(), "GPU studies also need the NVIDIA driver, the cuDNN torch was built with, a CUDA engine build")
	for _, v := range []string{"91900", "91901"} { // another patch level: reported, not flagged
		bi.CuDNNRuntime = v
		buf.Reset()
		printDoctor(&buf, diagnose(m, "", "results"))
		assert.Contains(t, buf.String(), "ok    cudnn copy "+v+" from /usr/lib/x86_64-linux-gnu/libcudnn.so.9 (torch built with 91900)")
		assert.NotContains(t, buf.String(), "need the cuDNN")
	}
	bi.CuDNNRuntime = ""
	buf.Reset()
	printDoctor(&buf, diagnose(m, "", "results"))
	assert.NotContains(t, buf.String(), "cudnn copy")
}
