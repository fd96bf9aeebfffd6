package report

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/stats/synth"
)

// TestGateWithHistory: one launch a side is inconclusive alone; with the
// trial's history of earlier runs (files in a --history directory) a 33%
// drop is a regression and a night like the others passes. The directory's
// NEW itself, a run of another measurement and a file that is not a summary
// are left out, and said so.
func TestGateWithHistory(t *testing.T) {
	models := []synth.Model{synth.H100, synth.H100.Scaled(1.2)}
	r := rand.New(rand.NewPCG(31, 1))
	run := func(id string, f float64) *Summary {
		s := synthRun(r, []synth.Model{models[0].Scaled(f), models[1].Scaled(f)}, 1)
		s.Schema, s.Kind, s.RunID, s.Study = SchemaVersion, KindSummary, id, "gate"
		return s
	}
	old, same, slow := run("old", 1), run("same", 1), run("slow", 0.67)

	c, err := Compare(old, slow, "old", "slow", 0.05)
	require.NoError(t, err)
	assert.Equal(t, stats.GateInconclusive, c.Gate, c.Verdict)
	assert.Equal(t, []string{"0", "1"}, c.Suspected)

	dir := t.TempDir()
	write := func(name string, s *Summary) {
		var b bytes.Buffer
		require.NoError(t, WriteJSON(&b, s))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644))
	}
	for i := range 6 {
		write(fmt.Sprintf("night%d.json", i), run(fmt.Sprintf("n%d", i), 1))
	}
	write("slow.json", slow) // NEW itself: left out
	other := run("other", 1)
	other.Comparable.Workload = "cuda, 20 steps after 5 warm-up"
	write("other.json", other)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.json"), []byte("{}"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("not a run"), 0o644))

	hist, notes, err := LoadGateHistory(dir, slow)
	require.NoError(t, err)
	assert.Len(t, hist, 6)
	assert.Contains(t, fmt.Sprint(notes), "left out 1 entries (not comparable with NEW): other.json")
	assert.Contains(t, fmt.Sprint(notes), "left out 1 entries (unreadable): notes.json")

	c, err = CompareWithHistory(old, slow, "old", "slow", 0.05, hist)
	require.NoError(t, err)
	assert.Equal(t, stats.GateFailed, c.Gate, c.Verdict)
	assert.Equal(t, []string{"0", "1"}, c.Regressions)
	assert.Equal(t, 6, c.Rows[0].Gate.HistoryRuns)
	assert.Contains(t, c.Rows[0].Gate.Method, "prediction interval from 6 earlier runs")

	hist, _, err = LoadGateHistory(dir, same)
	require.NoError(t, err)
	c, err = CompareWithHistory(old, same, "old", "same", 0.05, hist[:6])
	require.NoError(t, err)
	assert.Equal(t, stats.GatePassed, c.Gate, c.Verdict)

	_, _, err = LoadGateHistory(filepath.Join(dir, "missing"), same)
	assert.ErrorContains(t, err, "--history")
}

// TestGateHistoryCopies: a history folder that holds one run several times
// (a file copied, or a run directory beside its baseline file) counts it
// once, and OLD's own run not at all: five copies of OLD gave five "earlier
// runs" with no spread between them, and one launch a side passed on that
// point interval. Now the row is undecided and the notes say what was left
// out.
func TestGateHistoryCopies(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 2))
	run := func(id string, f float64) *Summary {
		s := synthRun(r, []synth.Model{synth.H100.Scaled(f)}, 1)
		s.Schema, s.Kind, s.RunID, s.Study = SchemaVersion, KindSummary, id, "gate"
		return s
	}
	old, cur, earlier := run("old", 1), run("new", 0.99), run("earlier", 1)
	dir := t.TempDir()
	write := func(name string, s *Summary) {
		var b bytes.Buffer
		require.NoError(t, WriteJSON(&b, s))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644))
	}
	for i := range 5 {
		write(fmt.Sprintf("old%d.json", i), old)
		write(fmt.Sprintf("earlier%d.json", i), earlier)
	}

	hist, notes, err := LoadGateHistory(dir, cur)
	require.NoError(t, err)
	require.Len(t, hist, 2, "each run once; OLD's run is an earlier run too")
	assert.Equal(t, "earlier", hist[0].RunID)
	assert.Equal(t, "old", hist[1].RunID)
	assert.Contains(t, fmt.Sprint(notes), "left out 8 entries (a run read already, by run ID): earlier1.json (= earlier0.json)")
	assert.Contains(t, fmt.Sprint(notes), "old1.json (= old0.json)")
	assert.Contains(t, fmt.Sprint(notes), "holds 2 comparable earlier runs; a trial needs 5")

	// what the copies decided before: five of OLD's run as history
	copies := []*Summary{old, old, old, old, old}
	c, err := CompareWithHistory(old, cur, "old", "new", 0.05, copies)
	require.NoError(t, err)
	assert.Equal(t, stats.GateInconclusive, c.Gate, c.Verdict)
	assert.Contains(t, c.Rows[0].Gate.Method, "no between-run spread")
}

// A run compared with itself (one run ID on both sides: the run, or a
// baseline written from it) cannot pass: nothing was measured twice.
// (Read-only audit, 2026-12-07: compare RUN COPY_OF_RUN printed PASS.)
func TestGateSameRunInconclusive(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 2))
	s := synthRun(r, []synth.Model{synth.H100, synth.H100.Scaled(1.2)}, 5)
	s.Schema, s.Kind, s.RunID, s.Study = SchemaVersion, KindSummary, "run-a", "gate"
	c, err := Compare(s, s, "a", "a-copy", 0.05)
	require.NoError(t, err)
	assert.Equal(t, stats.GateInconclusive, c.Gate, c.Verdict)
	assert.Contains(t, c.Verdict, "OLD and NEW are the same run (run-a)")
	other := *s
	other.RunID = "run-b"
	c, err = Compare(s, &other, "a", "b", 0.05)
	require.NoError(t, err)
	assert.Equal(t, stats.GatePassed, c.Gate, "two runs with the same values pass: %s", c.Verdict)
}
