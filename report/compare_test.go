package report

import (
	"bytes"
	"path/filepath"
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
