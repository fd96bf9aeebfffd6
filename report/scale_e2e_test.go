package report

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Runs at another scale (GPUs, nodes, ranks, threads, a world of one) measured
// something else: refused; a scale one side does not record: a warning.
func TestCompareRefusesOtherScale(t *testing.T) {
	old := Build(readFixture(t, "runs/bert-grid"), nil)
	run := readFixture(t, "runs/bert-grid-rerun")
	run.Manifest.Workload["gpus"] = 1
	_, err := Compare(old, Build(run, nil), "old", "new", 0.05)
	var nc *NotComparableError
	require.True(t, errors.As(err, &nc), "%v", err)
	assert.Contains(t, err.Error(), "workload.gpus differs (OLD 8, NEW 1)")
	delete(run.Manifest.Workload, "gpus")
	c, err := Compare(old, Build(run, nil), "old", "new", 0.05)
	require.NoError(t, err)
	assert.Contains(t, c.Warnings, "NEW does not record workload.gpus (OLD: 8): check that both runs used the same")
}
