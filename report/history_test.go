package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/stats"
)

func TestHistory(t *testing.T) {
	h, err := LoadHistory(filepath.Join("testdata", "history", "bert-grid"))
	require.NoError(t, err)
	require.Len(t, h.Runs, 3)
	assert.True(t, h.Runs[0].Created.Before(h.Runs[2].Created))
	assert.Equal(t, "bert-grid", h.Study)
	require.Len(t, h.Trials, 7)
	slow := fixID(knobs("bf16", "32"))
	for _, tr := range h.Trials {
		require.Len(t, tr.Points, 3)
		switch {
		case tr.ID == slow:
			require.NotNil(t, tr.Drift)
			assert.Equal(t, stats.Worse, tr.Drift.Verdict, "a 9%% drift over 6 launches each is decided: %s", tr.Drift.Text())
			assert.InDelta(t, 0.91, tr.Drift.Ratio, 0.03)
		case tr.Points[0].Value.N == 0:
			assert.Nil(t, tr.Drift, "%s never finished", tr.ID)
		}
	}
	for _, format := range HistoryFormats {
		var buf bytes.Buffer
		require.NoError(t, WriteHistory(&buf, h, format))
		assert.Contains(t, buf.String(), slow)
		if format == "html" {
			assert.Equal(t, 2, strings.Count(buf.String(), "<svg"))
		}
		if format == "md" {
			golden := filepath.Join("testdata", "golden", "history.md")
			if *update {
				require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			if d := firstDiff(string(want), buf.String()); d != "" {
				t.Errorf("%s differs (review, then go test ./report -update):\n%s", golden, d)
			}
		}
	}
}

func TestHistoryErrors(t *testing.T) {
	_, err := LoadHistory(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
	_, err = LoadHistory(t.TempDir())
	require.ErrorContains(t, err, "no run directories")
}
