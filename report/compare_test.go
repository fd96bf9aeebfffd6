package report

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

func load(t *testing.T, name string) *Summary {
	t.Helper()
	s, err := LoadSide(filepath.Join("testdata", name))
	require.NoError(t, err)
	return s
}

func TestCompareRuns(t *testing.T) {
	base := load(t, "runs/bert-grid")
	slowID := fixID(knobs("bf16", "32"))
	tests := []struct {
		description string
		new         string
		threshold   float64
		regressions []string
	}{
		{"a re-run of the same configuration is not a regression", "runs/bert-grid-rerun", 0.05, nil},
		{"12% slower bf16/32 is a regression at 5%", "runs/bert-grid-slower", 0.05, []string{slowID}},
		{"but not at a 20% threshold", "runs/bert-grid-slower", 0.20, nil},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			c, err := Compare(base, load(t, tt.new), "old", "new", tt.threshold)
			require.NoError(t, err)
			if tt.regressions == nil {
				tt.regressions = []string{}
			}
			assert.Equal(t, tt.regressions, c.Regressions)
			assert.Len(t, c.Rows, 7)
			for _, r := range c.Rows {
				if r.ID == slowID && tt.new == "runs/bert-grid-slower" {
					require.NotNil(t, r.Change)
					want := stats.Worse // 0.88x: slower by more than 5%, within ±20%
					if tt.threshold >= 0.2 {
						want = stats.NoDifference
					}
					assert.Equal(t, want, r.Change.Verdict)
					assert.InDelta(t, 0.88, r.Change.Ratio, 0.03)
					require.NotNil(t, r.MannWhitney)
				}
			}
			for _, format := range CompareFormats {
				var buf bytes.Buffer
				require.NoError(t, WriteComparison(&buf, c, format))
				assert.Contains(t, buf.String(), c.Verdict)
			}
		})
	}
}

func TestCompareSameConfigurationFlagsNothing(t *testing.T) {
	c, err := Compare(load(t, "runs/bert-grid"), load(t, "runs/bert-grid-rerun"), "a", "b", 0.05)
	require.NoError(t, err)
	for _, r := range c.Rows {
		if r.Change != nil {
			assert.NotEqual(t, stats.Worse, r.Change.Verdict, "%s: %s", r.ID, r.Change.Text())
			assert.NotEqual(t, stats.Better, r.Change.Verdict, "%s: %s", r.ID, r.Change.Text())
		}
	}
}

// TestCompareRefuses: runs that measured different things, or share no
// trial, are not compared (exit 2 in the command).
func TestCompareRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Summary)
		want string
	}{
		{"another model", func(s *Summary) { s.Comparable.Model = "bert/base" }, "the model differs (OLD bert/large, NEW bert/base)"},
		{"another GPU", func(s *Summary) { s.Comparable.GPU = "NVIDIA A100" }, "the GPU model differs"},
		{"other steps", func(s *Summary) { s.Comparable.Workload = "50 steps after 3 warm-up" }, "the measurement differs (OLD 5 steps after 3 warm-up, NEW 50 steps"},
		{"another objective", func(s *Summary) { s.Metric = stats.Metrics["tokens_per_s"] }, "the objective differs"},
		{"no trial in common", func(s *Summary) {
			for i := range s.Trials {
				s.Trials[i].ID += "x"
			}
		}, "no trial in common"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := load(t, "runs/bert-grid-rerun")
			tc.edit(n)
			_, err := Compare(load(t, "runs/bert-grid"), n, "a", "b", 0.05)
			var nc *NotComparableError
			require.ErrorAs(t, err, &nc)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCompareOutcomeChange(t *testing.T) {
	old := load(t, "runs/bert-grid")
	new := load(t, "runs/bert-grid")
	new.Trials[0].Outcome, new.Trials[0].Error = store.OOM, "CUDA out of memory"
	new.Trials = new.Trials[:len(new.Trials)-1] // one trial gone
	c, err := Compare(old, new, "a", "b", 0.05)
	require.NoError(t, err)
	assert.Equal(t, []string{new.Trials[0].ID}, c.Regressions)
	assert.Equal(t, []string{old.Trials[len(old.Trials)-1].ID}, c.OnlyOld)
}

func TestBaselineRoundTrip(t *testing.T) {
	s := load(t, "runs/bert-grid")
	s.Kind = KindBaseline
	path := filepath.Join(t.TempDir(), "baseline.json")
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, s))
	require.NoError(t, store.WriteFileAtomic(path, buf.Bytes()))
	b, err := LoadSide(path)
	require.NoError(t, err)
	assert.Equal(t, KindBaseline, b.Kind)
	c, err := Compare(b, load(t, "runs/bert-grid-slower"), path, "new", 0.05)
	require.NoError(t, err)
	assert.Equal(t, []string{fixID(knobs("bf16", "32"))}, c.Regressions, "launch values survive the baseline file")
}

func TestParseThreshold(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		err  bool
	}{
		{"5%", 0.05, false}, {"0.05", 0.05, false}, {"2.5%", 0.025, false}, {" 10 % ", 0.10, false},
		{"abc", 0, true}, {"-1%", 0, true}, {"0", 0, true}, {"150%", 0, true},
		// A bare number is a fraction, as in a study's compare.threshold: "5" is not 5%.
		{"5", 0, true}, {"1", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseThreshold(tt.in)
		if tt.err {
			assert.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.InDelta(t, tt.want, got, 1e-12, tt.in)
	}
}

func TestReadSummaryErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"garbage.json":  "{not json",
		"noschema.json": `{"kind":"summary"}`,
		"future.json":   `{"schema":99,"kind":"summary"}`,
		"kind.json":     `{"schema":1,"kind":"other"}`,
	} {
		p := filepath.Join(dir, name)
		require.NoError(t, store.WriteFileAtomic(p, []byte(body)))
		_, err := ReadSummary(p)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), p)
	}
}

// TestCompareFailsClosed: what compare cannot see is never a pass.
//   - A trial that finished in OLD and is not in NEW (a NEW run that stopped
//     early, or a study cut down) makes the gate inconclusive, naming it; a
//     trial that did not finish in OLD has nothing to regress from and is
//     only listed. NEW holding one trial of seven passed before.
//   - A baseline whose launches are all tainted (trials finished, no clean
//     launch) leaves every row undecided: it passed, "Holm over 0", before.
func TestCompareFailsClosed(t *testing.T) {
	old, rerun := load(t, "runs/bert-grid"), load(t, "runs/bert-grid-rerun")
	keep := func(s *Summary, ids ...string) *Summary {
		var ts []Trial
		for _, tr := range s.Trials {
			if slices.Contains(ids, tr.ID) {
				ts = append(ts, tr)
			}
		}
		s.Trials = ts
		return s
	}
	c, err := Compare(old, keep(load(t, "runs/bert-grid-rerun"), "t-72f0c541"), "old", "new", 0.05)
	require.NoError(t, err)
	assert.Equal(t, stats.GateInconclusive, c.Gate, c.Verdict)
	assert.Contains(t, c.Verdict, "INCONCLUSIVE: 4 trials that finished in OLD are not in NEW: micro_batch=32 (t-b3cb018b), precision=bf16 (t-37eef005)")
	assert.Contains(t, c.Verdict, "the 1 in both runs: no trial slower by more than 5% (95% one-sided, Holm over 1)")
	assert.Contains(t, c.Verdict, "--inconclusive=pass")
	assert.Len(t, c.OnlyOld, 6)

	// the trials that did not finish in OLD (oom, unsupported) may be missing
	var finished []string
	for _, tr := range old.Trials {
		if tr.Outcome == store.OK && tr.ID != "t-37eef005" { // the re-run's undecided bf16 left out too
			finished = append(finished, tr.ID)
		}
	}
	c, err = Compare(keep(load(t, "runs/bert-grid"), finished...), keep(load(t, "runs/bert-grid-rerun"), finished...), "old", "new", 0.05)
	require.NoError(t, err)
	require.Equal(t, stats.GatePassed, c.Gate, c.Verdict)
	c, err = Compare(keep(load(t, "runs/bert-grid"), append(finished, old.Trials[2].ID, old.Trials[6].ID)...),
		keep(load(t, "runs/bert-grid-rerun"), finished...), "old", "new", 0.05)
	require.NoError(t, err)
	assert.Equal(t, []store.Outcome{store.OOM, store.Unsupported}, []store.Outcome{old.Trials[2].Outcome, old.Trials[6].Outcome})
	assert.Equal(t, stats.GatePassed, c.Gate, c.Verdict)
	assert.Len(t, c.OnlyOld, 2)
	// and a finished one may not
	c, err = Compare(keep(load(t, "runs/bert-grid"), append(finished, "t-37eef005")...), keep(load(t, "runs/bert-grid-rerun"), finished...), "old", "new", 0.05)
	require.NoError(t, err)
	assert.Equal(t, stats.GateInconclusive, c.Gate, c.Verdict)
	assert.Contains(t, c.Verdict, "INCONCLUSIVE: 1 trial that finished in OLD is not in NEW: precision=bf16 (t-37eef005)")

	// a regression stays one, the missing trials said after it
	c, err = Compare(old, keep(load(t, "runs/bert-grid-slower"), fixID(knobs("bf16", "32"))), "old", "new", 0.05)
	require.NoError(t, err)
	assert.Equal(t, stats.GateFailed, c.Gate, c.Verdict)
	assert.Contains(t, c.Verdict, ". Also 4 trials that finished in OLD are not in NEW")

	// every launch of OLD tainted
	tainted := load(t, "runs/bert-grid")
	for i := range tainted.Trials {
		tainted.Trials[i].Launches.Values, tainted.Trials[i].Value = nil, stats.Value{}
	}
	c, err = Compare(tainted, rerun, "old", "new", 0.05)
	require.NoError(t, err)
	assert.Equal(t, stats.GateInconclusive, c.Gate, c.Verdict)
	assert.Len(t, c.Undecided, 5)
	assert.Contains(t, c.Verdict, "INCONCLUSIVE: 5 of 5 trials could not be judged; no clean launch in OLD: baseline (t-72f0c541)")
	for _, r := range c.Rows {
		assert.NotContains(t, r.Note, "was ok, now finishes")
	}
}
