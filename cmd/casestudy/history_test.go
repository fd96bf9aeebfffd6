package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHistoryHelpWording (audit nit): the help says what last vs first
// computes, compare's 90% pooled Student t interval (it said "95% Welch").
func TestHistoryHelpWording(t *testing.T) {
	code, stdout, stderr := runCLI(t, "history", "--help")
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stdout, "Welch")
	assert.Contains(t, stdout, "90% Student t interval over launches (pooled variance)")
	assert.Contains(t, stdout, "cannot detect (N runs, K trials)")
	code, stdout, stderr = runCLI(t, "history", fixture("history/bert-grid"))
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stdout, "Welch")
	assert.Contains(t, stdout, "ratio with a 90% Student t interval over launches (pooled variance, as compare)")
}

// TestHistoryCommandCopies (audit: a copied run directory counted twice):
// the copy is left out, and a warning says so.
func TestHistoryCommandCopies(t *testing.T) {
	dir := t.TempDir()
	src := fixture("history/bert-grid")
	for _, name := range []string{"run1", "run2", "run3"} {
		require.NoError(t, os.CopyFS(filepath.Join(dir, name), os.DirFS(filepath.Join(src, name))))
	}
	require.NoError(t, os.CopyFS(filepath.Join(dir, "run2-copy"), os.DirFS(filepath.Join(src, "run2"))))
	code, stdout, stderr := runCLI(t, "history", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "over 3 runs")
	assert.Contains(t, stdout, "warning: left out "+filepath.Join(dir, "run2-copy")+": run 20261201T020000Z-bbbbbb again (a copy of "+
		filepath.Join(dir, "run2")+")")
}
