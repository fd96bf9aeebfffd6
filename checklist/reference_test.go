package checklist

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// Real runs: the audit's (results/reference, tracked) and the H100 ResNet-50
// run of 2026-12-06 (testdata/h100-resnet50-2026-12-06: its manifest and
// records, three steps a rank kept, GPU samples and timelines left out; the
// launches' samples/s, the summaries and so every verdict are the run's).

func readRun(t *testing.T, dir string) *store.Run {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		t.Skipf("%s: %v", dir, err)
	}
	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	return run
}

func resultsByID(run *store.Run) map[string]Result {
	out := map[string]Result{}
	for _, r := range Evaluate(run, Config{}) {
		out[r.RuleID] = r
	}
	return out
}

func resultText(r Result) string {
	return r.Message + "\n" + strings.Join(r.Evidence, "\n") + "\n" + r.Recommendation
}

// TestCheckAARunFailsTheGate: gpu-check-2026-12-06b/aa has
// no trials.jsonl; check said "0 finding(s)" and `--fail-on error` passed
// while the report said "No trial finished: 2 not_run".
func TestCheckAARunFailsTheGate(t *testing.T) {
	run := readRun(t, filepath.Join("..", "results", "reference", "gpu-check-2026-12-06b", "aa"))
	require.Empty(t, run.Trials)
	res := resultsByID(run)
	for _, id := range []string{"failed-trials", "untrusted-launches"} {
		assert.Equal(t, Finding, res[id].Status, id)
		assert.Equal(t, Error, res[id].Severity, id)
		assert.Contains(t, resultText(res[id]), "2 planned trial(s)", id)
		assert.ElementsMatch(t, []string{"c46fda89", "04844a37"}, res[id].Trials, id)
	}
	assert.NotEmpty(t, Gate(Evaluate(run, Config{}), Error))
}

// TestCheckTruncatedRunFailsTheGate: the H100 run with its last trials' records
// removed (a run stopped mid-way) gave 0 findings.
func TestCheckTruncatedRunFailsTheGate(t *testing.T) {
	run := readRun(t, filepath.Join("testdata", "h100-resnet50-2026-12-06"))
	require.NotEmpty(t, Gate(Evaluate(run, Config{}), Info), "the whole run has an info finding")
	require.Empty(t, Gate(Evaluate(run, Config{}), Error), "the whole run measured its plan")
	run.Trials = run.Trials[:len(run.Trials)-2] // bc267457, e32ac469
	res := resultsByID(run)
	r := res["failed-trials"]
	require.Equal(t, Finding, r.Status, r.Message)
	assert.Equal(t, Error, r.Severity)
	assert.Contains(t, r.Message, "2 of 9 planned trial(s) never ran (no record in trials.jsonl), e.g. bc267457 (micro_batch=256)")
	assert.Equal(t, Error, res["untrusted-launches"].Severity)
	assert.Equal(t, Finding, res["untrusted-launches"].Status)
	gated := Gate(Evaluate(run, Config{}), Error)
	require.Len(t, gated, 2)
}

// TestCheckH100ResNet50Run: the run's baseline captures graphs (the registry's
// default is false) and eager was measurably 3.5-4.8% slower, inside ±5%;
// check advised leaving graphs at its default. Its counts took in the 3
// dropped combinations ("12 trials" of 9) and mps printed 39.14059257507324 ms.
func TestCheckH100ResNet50Run(t *testing.T) {
	run := readRun(t, filepath.Join("testdata", "h100-resnet50-2026-12-06"))
	res := resultsByID(run)

	ne := res["no-effect-knob"]
	require.Equal(t, Finding, ne.Status, ne.Message)
	assert.Contains(t, ne.Recommendation, "graphs: keep true, measurably faster (+3.5 to +4.8%, less than 5%) than false")
	assert.Contains(t, ne.Recommendation, "cudnn.benchmark_limit: keep off")
	assert.NotContains(t, ne.Recommendation, "default")

	for _, id := range []string{"failed-trials", "untrusted-launches"} {
		r := res[id]
		require.Equal(t, Pass, r.Status, id)
		assert.Contains(t, r.Message, "9 of 9 planned trial(s) measured; 3 combination(s) dropped before running, not counted", id)
		assert.NotContains(t, r.Message, "12 trial", id)
	}

	mps := res["mps"]
	assert.Contains(t, mps.Message, "its steps take 39.1 ms:")
	assert.NotContains(t, mps.Message, "39.14")
}

// TestCheckKernelMixRun: ResNet-50 on the H200 with profiles, bf16
// against fp16 on one launch each. profile-normalisation recommended fp16
// ("PyTorch's own kernels ... 25% faster") although the fp16 twin measured
// 1.01x undecided and both run the engine's own batch norm, listed the twin
// twice and cut its kernels to "cs::cuda::"; cuda-graphs called the step
// launch-bound while profile-launch-bound, on the same profiles, passed.
func TestCheckKernelMixRun(t *testing.T) {
	run := readRun(t, filepath.Join("..", "results", "reference", "resnet50-h200-kernel-mix-2026-12-02"))
	res := resultsByID(run)

	n := res["profile-normalisation"]
	require.Equal(t, Finding, n.Status, n.Message)
	text := resultText(n)
	assert.Contains(t, text, "precision: fp16 against bf16 (trials eb1aeffe, b5696fdd): 1.01× undecided (one launch: estimate only)")
	assert.Contains(t, text, "cs::cuda::(anonymous namespace)::bn_bwd_apply_kernel (the engine's own)")
	for _, bad := range []string{"PyTorch's own", "25%", "largest: cs::cuda::\n", "cuDNN"} {
		assert.NotContains(t, text+"\n", bad)
	}
	assert.NotContains(t, n.Recommendation, "precision: fp16")
	twin := 0
	for _, e := range n.Evidence {
		if strings.HasPrefix(e, "eb1aeffe") {
			twin++
		}
	}
	assert.Equal(t, 1, twin, "the fp16 twin's profile once: %q", n.Evidence)

	lb, cg := res["profile-launch-bound"], res["cuda-graphs"]
	require.Equal(t, Pass, lb.Status, lb.Message)
	require.Equal(t, Pass, cg.Status, cg.Message)
	assert.Contains(t, cg.Message, "its profile shows the GPU idle only 2.29% of the step (at most 20.0%): not launch-bound")
}
