package report

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHistorySkipsRunsBeingCreated (audit C-6 note): a .<run>.new folder
// (a run being created, or one a kill left half made) is not a run of the
// history even when it holds a manifest.
func TestHistorySkipsRunsBeingCreated(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("testdata", "history", "bert-grid")
	runs, err := os.ReadDir(src)
	require.NoError(t, err)
	require.NotEmpty(t, runs)
	for i, name := range []string{"run1", ".run2.new"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		for _, f := range []string{"manifest.json", "trials.jsonl"} {
			b, err := os.ReadFile(filepath.Join(src, runs[i].Name(), f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name, f), b, 0o644))
		}
	}
	h, err := LoadHistory(dir)
	require.NoError(t, err)
	assert.Len(t, h.Runs, 1)
}
