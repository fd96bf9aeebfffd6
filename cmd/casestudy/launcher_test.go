package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
)

func TestRunSubmitBadInput(t *testing.T) {
	study := filepath.Join(repoRoot(t), "studies", "gpt", "smoke.yaml")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", study, "--submit"}, "add --launcher slurm"},
		{[]string{"run", study, "--launcher", "pbs"}, `unknown launcher "pbs"`},
	} {
		code, _, stderr := runCLI(t, tt.args...)
		assert.Equal(t, exitcode.Input, code, stderr)
		assert.Contains(t, stderr, tt.want)
	}
	t.Setenv("SLURM_JOB_ID", "5")
	code, _, stderr := runCLI(t, "run", study, "--launcher", "slurm", "--submit")
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, "inside an allocation")
}

// --gpus-per-node is unset unless given: no "-1" default in the help, and a
// negative count is a usage error naming the flag.
func TestGPUsPerNodeFlag(t *testing.T) {
	code, out, _ := runCLI(t, "run", "--help")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "--gpus-per-node int")
	assert.NotContains(t, out, "default -1")
	code, _, errOut := runCLI(t, "run", "studies/gpt/smoke.yaml", "--gpus-per-node", "-2")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `invalid argument "-2" for "--gpus-per-node"`)
	o := launcherOptions{gpusPerNode: -1}
	require.NoError(t, unsetInt{&o.gpusPerNode}.Set("4"))
	assert.Equal(t, 4, o.gpusPerNode)
	unset, zero := -1, 0
	assert.Equal(t, "", unsetInt{&unset}.String())
	assert.Equal(t, "0", unsetInt{&zero}.String())
}
