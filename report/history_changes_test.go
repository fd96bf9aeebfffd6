package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nightsDir writes n nightly runs of the bert-grid fixture (6 launches a
// trial, 1% launch noise) into a temp dir; from night step (1-based) on the
// bf16/micro_batch=32 trial runs at factor. Two runs share the first
// night's minute.
func nightsDir(t *testing.T, n, step int, factor float64) string {
	dir := t.TempDir()
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		created := start.Add(time.Duration(i) * 24 * time.Hour)
		if i == 1 {
			created = start.Add(20 * time.Second) // the same minute as night 1
		}
		slow := map[string]float64{}
		if step > 0 && i+1 >= step {
			slow["bf16/32"] = factor
		}
		id := fmt.Sprintf("2026120%dT0200Z-n%02d", i%10, i)
		writeRun(t, filepath.Join(dir, id), gridRun(id, created, uint64(100+i), slow).run())
	}
	return dir
}

// TestHistoryChangePoint: twelve nights with a 15% drop of one trial at
// night 8: the change point names night 8 and that trial only; --last 6
// keeps the newest six runs.
func TestHistoryChangePoint(t *testing.T) {
	h, err := LoadHistory(nightsDir(t, 12, 8, 0.85))
	require.NoError(t, err)
	require.Len(t, h.Runs, 12)
	slow := fixID(knobs("bf16", "32"))
	for _, tr := range h.Trials {
		if tr.ID == slow {
			require.Len(t, tr.Changes, 1, "%s", h.changeText(tr))
			assert.Equal(t, 7, tr.Changes[0].Index, "night 8")
			assert.InDelta(t, 0.85, tr.Changes[0].Ratio, 0.02)
			assert.Contains(t, h.changeText(tr), "run 8 (2026-12-08 02:00): 0.85×")
		} else {
			assert.Empty(t, tr.Changes, "%s (%s): %s", tr.Knobs, tr.ID, h.changeText(tr))
		}
	}
	labels := runLabels(h.Runs)
	assert.Equal(t, "2026-12-01 02:00:00", labels[0], "two runs in one minute get seconds")
	assert.Equal(t, "2026-12-01 02:00:20", labels[1])
	assert.Equal(t, "2026-12-03 02:00", labels[2], "with the year")

	var buf bytes.Buffer
	require.NoError(t, WriteHistory(&buf, h, "text"))
	head := strings.SplitN(buf.String(), "\n", 4)[2]
	assert.True(t, strings.HasPrefix(head, "trial"), head)
	assert.Less(t, strings.Index(head, "change point"), strings.Index(head, "2026-12-01"), "the answer comes before the runs")

	h.Last(6)
	require.Len(t, h.Runs, 6)
	for _, tr := range h.Trials {
		require.Len(t, tr.Points, 6)
	}
	assert.Equal(t, "2026-12-07 02:00", runLabels(h.Runs)[0])
}

// TestHistoryAA: twelve nights of the same code: no change point.
func TestHistoryAA(t *testing.T) {
	h, err := LoadHistory(nightsDir(t, 12, 0, 1))
	require.NoError(t, err)
	for _, tr := range h.Trials {
		assert.Empty(t, tr.Changes, "%s: %s", tr.Knobs, h.changeText(tr))
	}
	assert.InDelta(t, 0.05/5, h.ChangeLevel, 1e-12, "five trials finish every night")
}

// TestHistoryLinks: each night's report is linked from the HTML.
func TestHistoryLinks(t *testing.T) {
	dir := nightsDir(t, 6, 0, 1)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	_, err = Write(mustRead(t, filepath.Join(dir, entries[0].Name())), nil, "", []string{"html"})
	require.NoError(t, err)
	h, err := LoadHistory(dir)
	require.NoError(t, err)
	LinkRuns(h, filepath.Join(dir, "history.html"))
	var buf bytes.Buffer
	require.NoError(t, WriteHistory(&buf, h, "html"))
	assert.Contains(t, buf.String(), `<a href="`+entries[0].Name()+`/report.html">`)
	assert.Equal(t, 2, strings.Count(buf.String(), `/report.html"`), "the column and the run list; the other nights have no report")
}
