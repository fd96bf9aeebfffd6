package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/profile"
	"github.com/casestudy/casestudy/store"
)

// profiledRun is a run of two profiled trials, BERT-128-like: the eager
// baseline idles 48% of its 50 ms step, graphs=true 3% of 25.5 ms.
func profiledRun(t *testing.T) *store.Run {
	t.Helper()
	mk := func(id string, knobs map[string]string, changed []string, stepMS, busyMS, gemm, ew float64, kernels int) store.TrialRecord {
		rec := store.TrialRecord{Schema: 1, ID: id, Knobs: knobs, Changed: changed, Outcome: store.OK}
		for rep := 0; rep < 2; rep++ {
			raw := engine.Profile{Steps: 3, Device: "cuda", StepMS: []float64{1.04 * stepMS, 1.04 * stepMS, 1.04 * stepMS}, BusyMS: 3 * busyMS,
				Kernels: []engine.KernelTotal{
					{Name: "nvjet_tst_192x192_64x3_1x2_h_bz_coopB_NNT", Calls: 3 * kernels / 2, MS: 3 * gemm},
					{Name: "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", Calls: 3 * kernels / 2, MS: 3 * ew},
				},
				ProfileMS: 400, AnalysisMS: 20, TraceMS: 80, TraceFormat: "kineto", TraceBytes: 3 << 20}
			var steps []engine.StepMetrics
			for i := 0; i < 6; i++ {
				steps = append(steps, engine.StepMetrics{Step: i, StepMS: stepMS, Samples: 32})
			}
			p := profile.Summarize(raw, steps)
			p.Trace = store.TraceName(id, 0, rep)
			rec.Repeats = append(rec.Repeats, store.RepeatRecord{Repeat: rep, Outcome: store.OK, SamplesPerS: 32e3 / stepMS,
				Ranks: []store.RankRecord{{Rank: 0, Steps: steps, Profile: p}}})
		}
		return rec
	}
	base := map[string]string{"graphs": "false", "precision": "bf16", "profile": "3"}
	graphs := map[string]string{"graphs": "true", "precision": "bf16", "profile": "3"}
	run := &store.Run{Manifest: store.Manifest{Schema: 1, Study: "bert-profile", RunID: "r1", Created: time.Unix(0, 0)},
		Trials: []store.TrialRecord{
			mk("eager", base, nil, 50, 26, 20, 6, 1800),
			mk("graph", graphs, []string{"graphs"}, 25.5, 24.7, 19, 5.7, 1800),
		}}
	run.Trials[1].Index = 1
	// a launch whose profile failed: the measurement stands, the report says why
	run.Trials[1].Repeats[1].Ranks = append(run.Trials[1].Repeats[1].Ranks,
		store.RankRecord{Rank: 1, Profile: profile.Failed(assert.AnError)})
	return run
}

func TestProfilesSection(t *testing.T) {
	s := Build(profiledRun(t), nil)
	ps := s.Profiles
	require.NotNil(t, ps)
	require.Len(t, ps.Trials, 2)
	assert.Equal(t, []string{profile.GEMM, profile.Elementwise}, ps.Categories, "the table's order")
	eager := ps.Trials[0]
	assert.True(t, eager.Baseline)
	require.NotNil(t, eager.Profile)
	assert.Equal(t, 2, eager.Profile.Launches)
	assert.InDelta(t, 0.48, eager.Profile.IdleShare, 1e-9)
	assert.Len(t, eager.Traces, 2)
	assert.Equal(t, "logs/eager/rank0.r1.trace.json", eager.Traces[1].Path)
	assert.Len(t, ps.Trials[1].Errors, 1, "the failed profile is named")

	require.Len(t, ps.Changes, 1)
	c := ps.Changes[0]
	assert.Equal(t, "graphs", c.Knob)
	assert.Contains(t, c.Text, "graphs=true: GPU idle 48% → 3.1%")
	assert.Contains(t, c.Text, "step 50.00 → 25.50 ms")
	assert.NotContains(t, c.Text, "gemm/matmul", "a category that moved by less than 3% of the step is left out")
	assert.InDelta(t, 0.04, ps.OverheadShare, 1e-9, "profiled steps 4% slower")
	assert.InDelta(t, 500, ps.ExtraWallMS, 1e-9, "profile + analysis + trace per launch")

	var md bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, s))
	text := md.String()
	for _, want := range []string{"## Where the time went (kernel profiles)", "| eager (baseline) | 50.00 | 26.00 | 48% | 1800 |",
		"20.00 (77%)", "`graphs=true` (trial graph vs baseline eager): step 50.00 → 25.50 ms; GPU idle 48% → 3.1%",
		"[eager r0 rank 0](logs/eager/rank0.r0.trace.json) (3.0 MiB)", "repeat 1 rank 1: ", "top kernels"} {
		assert.Contains(t, text, want)
	}

	var html bytes.Buffer
	require.NoError(t, WriteHTML(&html, s))
	h := html.String()
	for _, want := range []string{`<h2 id="profiles">`, `href="#profiles"`, `aria-label="Kernel time per category and idle time per trial"`,
		`<a href="logs/graph/rank0.r0.trace.json" download type="application/json" class="trace">r0 rank 0</a>`, "GPU idle 48% → 3.1%", "nvjet_tst_192x192"} {
		assert.Contains(t, h, want)
	}

	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, s))
	var back struct {
		Profiles *Profiles `json:"profiles"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.NotNil(t, back.Profiles)
	assert.Equal(t, c.Text, back.Profiles.Changes[0].Text)
}

func TestNoProfilesNoSection(t *testing.T) {
	run := profiledRun(t)
	for i := range run.Trials {
		for j := range run.Trials[i].Repeats {
			for k := range run.Trials[i].Repeats[j].Ranks {
				run.Trials[i].Repeats[j].Ranks[k].Profile = nil
			}
		}
	}
	s := Build(run, nil)
	assert.Nil(t, s.Profiles)
	var md, html bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, s))
	require.NoError(t, WriteHTML(&html, s))
	assert.NotContains(t, md.String(), "kernel profiles")
	assert.NotContains(t, html.String(), `id="profiles"`)
}

// TestTraceLinksFromAnotherFolder: a report written outside the run directory
// links the traces through the way back to it.
func TestTraceLinksFromAnotherFolder(t *testing.T) {
	run := profiledRun(t)
	run.Dir = filepath.Join(t.TempDir(), "results", "bert-profile", "r1")
	require.NoError(t, os.MkdirAll(run.Dir, 0o755))
	out := filepath.Join(filepath.Dir(run.Dir), "reports")
	paths, err := Write(run, nil, out, []string{"md"})
	require.NoError(t, err)
	b, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	assert.Contains(t, string(b), "(../r1/logs/eager/rank0.r0.trace.json)")
	assert.True(t, strings.HasPrefix(paths[0], out))
}
