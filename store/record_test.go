package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFailedRankAlwaysWritten: failed_rank is in every line, 0 included
// (issue 21, defect 17); -1 means no rank failed.
func TestFailedRankAlwaysWritten(t *testing.T) {
	w := newWriter(t)
	require.NoError(t, w.WriteManifest(&Manifest{Study: "s"}))
	require.NoError(t, w.Append(&TrialRecord{ID: "rank0", Outcome: Crashed, FailedRank: 0}))
	require.NoError(t, w.Append(&TrialRecord{ID: "none", Outcome: OK, FailedRank: -1}))
	b, err := os.ReadFile(filepath.Join(w.Dir, "trials.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], `"failed_rank":0`)
	assert.Contains(t, lines[1], `"failed_rank":-1`)
	run, err := ReadRun(w.Dir)
	require.NoError(t, err)
	assert.Equal(t, 0, run.Trials[0].FailedRank)
	assert.Equal(t, -1, run.Trials[1].FailedRank)
}

// TestFutureSchemaRefused: a trials.jsonl line of a newer schema is refused
// by the reader every command uses, naming the version found and the one
// understood (issue 21, defect 14).
func TestFutureSchemaRefused(t *testing.T) {
	w := newWriter(t)
	require.NoError(t, w.WriteManifest(&Manifest{Study: "s"}))
	require.NoError(t, w.Append(&TrialRecord{ID: "a", Outcome: OK}))
	require.NoError(t, w.Close())
	f, err := os.OpenFile(filepath.Join(w.Dir, "trials.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"schema":99,"id":"b","outcome":"ok"}` + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	for _, read := range []func() error{
		func() error { _, err := ReadRun(w.Dir); return err },
		func() error { _, err := ReadTrials(filepath.Join(w.Dir, "trials.jsonl")); return err },
		func() error { _, _, err := OpenExisting(w.Dir); return err },
	} {
		err := read()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "trials.jsonl:2: schema 99 is newer than this casestudy understands (1)")
	}
}
