package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

// TestRunProfileSmoke runs studies/gpt/profile-smoke.yaml (profile: 2) through
// the real engine with --profile 3 on top: every rank of every launch records
// its profile of 3 more steps with categories, writes a Chrome trace that
// parses with trace events, and the reports carry the kernel-mix section.
func TestRunProfileSmoke(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(asMainEnv, "1")
	t.Setenv(engine.EnvLibrary, lib)
	out := t.TempDir()
	study := filepath.Join(repoRoot(t), "studies", "gpt", "profile-smoke.yaml")
	code, stdout, stderr := runCLI(t, "run", study, "--out", out, "--profile", "3")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	dir := onlyRunDir(t, out)
	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	require.Len(t, run.Trials, 2)
	for _, tr := range run.Trials {
		require.Equal(t, store.OK, tr.Outcome, tr.Error)
		assert.Equal(t, "3", tr.Knobs["profile"], "--profile overrides the study's profile: 2")
		for _, rp := range tr.Repeats {
			require.NotNil(t, rp.Timeline)
			assert.Positive(t, rp.Timeline.PhaseMS(timeline.PhaseProfile), "the timeline has the profiled steps apart from teardown")
			for _, rk := range rp.Ranks {
				assert.Len(t, rk.Steps, 5, "the profiled steps are not measured steps")
				p := rk.Profile
				require.NotNil(t, p, "trial %s repeat %d rank %d", tr.ID, rp.Repeat, rk.Rank)
				require.True(t, p.OK(), p.Error)
				assert.Equal(t, 3, p.Steps)
				assert.Equal(t, "cpu", p.Device)
				assert.Positive(t, p.MS("gemm/matmul"), "categories: %+v", p.Categories)
				assert.Positive(t, p.BusyMS)
				assert.Positive(t, p.ExtraWallMS)
				assert.NotEmpty(t, p.Top)
				require.Equal(t, store.TraceName(tr.ID, rk.Rank, rp.Repeat), p.Trace)
				b, err := os.ReadFile(filepath.Join(dir, p.Trace))
				require.NoError(t, err)
				var doc struct {
					TraceEvents []struct {
						Name string  `json:"name"`
						Ph   string  `json:"ph"`
						Dur  float64 `json:"dur"`
					} `json:"traceEvents"`
				}
				require.NoError(t, json.Unmarshal(b, &doc), "the trace is JSON")
				ops := 0
				for _, ev := range doc.TraceEvents {
					if ev.Ph == "X" && strings.HasPrefix(ev.Name, "aten::") {
						ops++
					}
				}
				assert.Greater(t, ops, 50, "the trace holds the operators")
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	for _, want := range []string{"## Where the time went (kernel profiles)", "`grad_accum=2` (trial",
		"CPU operator self time", "rank0.r0.trace.json"} {
		assert.Contains(t, string(md), want)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(html), `id="profiles"`)
	assert.Contains(t, string(html), "Kernel time per category and idle time per trial")
	var sum struct {
		Profiles struct {
			Trials []struct {
				Profile struct {
					Categories []struct{ Category string } `json:"categories"`
				} `json:"profile"`
			} `json:"trials"`
		} `json:"profiles"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &sum))
	require.Len(t, sum.Profiles.Trials, 2)
	assert.NotEmpty(t, sum.Profiles.Trials[0].Profile.Categories)
}

func TestRunProfileFlagBadValue(t *testing.T) {
	study := filepath.Join(repoRoot(t), "studies", "gpt", "smoke.yaml")
	code, _, stderr := runCLI(t, "run", study, "--out", t.TempDir(), "--profile", "lots")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--profile")
	assert.Contains(t, stderr, "off | integer 1..100")
}
