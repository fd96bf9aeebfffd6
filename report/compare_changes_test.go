package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// TestCompareChangedBetweenRuns: a copy of the real H100 BERT run with its
// provenance edited (torch, NCCL, driver, GPU UUID, study file, commit) and
// micro_batch=64 10% slower: compare names the regression by its knobs,
// lists every change in text, Markdown, HTML and JSON, and the HTML has the
// ratio chart and links to both reports.
func TestCompareChangedBetweenRuns(t *testing.T) {
	dir := t.TempDir()
	oldDir, newDir := filepath.Join(dir, "old"), filepath.Join(dir, "new")
	old := readFixture(t, "h100/bert")
	writeRun(t, oldDir, old)
	cur := readFixture(t, "h100/bert")
	m := &cur.Manifest
	m.Engine.Torch, m.Engine.NCCL = "2.12.0", "2.29.1"
	m.Host.Driver = "590.10"
	m.Host.GPUs[0].UUID = "GPU-00000000-1111-2222-3333-444444444444"
	m.StudySHA256 = strings.Repeat("ab", 32)
	m.Tool.Commit = "0123456789ab"
	slow := ""
	for i := range cur.Trials {
		rec := &cur.Trials[i]
		if rec.Knobs["micro_batch"] == "64" && rec.Outcome == "ok" {
			slow = rec.ID
			for j := range rec.Repeats {
				rec.Repeats[j].SamplesPerS *= 0.9
			}
		}
	}
	require.NotEmpty(t, slow)
	writeRun(t, newDir, cur)
	for _, d := range []string{oldDir, newDir} { // each run has its report
		_, err := Write(mustRead(t, d), nil, "", []string{"html"})
		require.NoError(t, err)
	}

	c, err := Compare(mustSide(t, oldDir), mustSide(t, newDir), oldDir, newDir, 0.05)
	require.NoError(t, err)
	require.Equal(t, []string{slow}, c.Regressions)
	assert.Contains(t, c.Verdict, "micro_batch=64 ("+slow+")", "the regression is named by its knobs")
	what := map[string][2]string{}
	for _, ch := range c.Changed {
		what[ch.What] = [2]string{ch.Old, ch.New}
	}
	assert.Equal(t, [2]string{"2.11.0", "2.12.0"}, what["torch"])
	assert.Equal(t, [2]string{"2.28.3", "2.29.1"}, what["NCCL"])
	assert.Equal(t, "590.10", what["driver"][1])
	assert.Equal(t, "GPU-00000000-1111-2222-3333-444444444444", what["GPU UUIDs"][1])
	assert.Contains(t, what, "study sha256")
	assert.Contains(t, what["casestudy (commit)"][1], "0123456789ab")
	assert.Len(t, c.Changed, 6, "nothing else changed: %v", c.Changed)

	out := filepath.Join(dir, "cmp", "compare.html")
	LinkReports(c, out)
	assert.Equal(t, "../old/report.html", c.Old.Report)
	assert.Equal(t, "../new/report.html", c.New.Report)
	for _, format := range CompareFormats {
		var buf bytes.Buffer
		require.NoError(t, WriteComparison(&buf, c, format))
		s := buf.String()
		assert.Contains(t, s, "2.29.1", format)
		assert.Contains(t, s, "GPU-00000000-1111-2222-3333-444444444444", format)
		if format == "html" {
			assert.Contains(t, s, `id="fig-compare"`)
			assert.Contains(t, s, `class="ref threshold"`)
			assert.Contains(t, s, `href="../old/report.html"`)
			assert.Contains(t, s, `href="../new/report.html"`)
			assert.Equal(t, 8, strings.Count(s, `class="mark ratio"`), "one point per compared trial, the baseline too")
		}
	}

	// the run against itself: nothing changed, and it says so
	same, err := Compare(mustSide(t, oldDir), mustSide(t, oldDir), oldDir, oldDir, 0.05)
	require.NoError(t, err)
	assert.Empty(t, same.Changed)
	var buf bytes.Buffer
	require.NoError(t, WriteComparison(&buf, same, "text"))
	assert.Contains(t, buf.String(), "changed between runs: nothing recorded")
}

func mustSide(t *testing.T, path string) *Summary {
	t.Helper()
	s, err := LoadSide(path)
	require.NoError(t, err)
	return s
}

func mustRead(t *testing.T, dir string) *store.Run {
	t.Helper()
	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	return run
}
