package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/study"
)

func TestLauncherKind(t *testing.T) {
	plain := &study.Study{Path: "s.yaml", Launcher: map[string]string{}}
	slurmStudy := &study.Study{Path: "m.yaml", Launcher: map[string]string{"kind": "slurm"}}
	inJob := []string{"SLURM_JOB_ID=12"}
	tests := []struct {
		description string
		opts        launcherOptions
		study       *study.Study
		env         []string
		want        string
		err         string
	}{
		{description: "default is local", study: plain, want: "local"},
		{description: "inside an allocation", study: plain, env: inJob, want: "slurm"},
		{description: "the flag wins over the allocation", opts: launcherOptions{kind: "local"}, study: plain, env: inJob, want: "local"},
		{description: "the study's launcher.kind", study: slurmStudy, env: inJob, want: "slurm"},
		{description: "slurm outside an allocation", study: slurmStudy, err: "m.yaml: launcher.kind: the slurm launcher runs trials as job steps inside an allocation"},
		{description: "submit from the study's launcher.kind", opts: launcherOptions{submit: true}, study: slurmStudy, want: "slurm"},
		{description: "submit needs slurm", opts: launcherOptions{submit: true}, study: plain, err: "add --launcher slurm"},
		{description: "submit with the flag", opts: launcherOptions{kind: "slurm", submit: true}, study: plain, want: "slurm"},
		{description: "unknown flag value", opts: launcherOptions{kind: "ssh"}, study: plain, err: `--launcher: unknown launcher "ssh"`},
		{description: "multi-node needs slurm", opts: launcherOptions{kind: "local"},
			study: &study.Study{Path: "m.yaml", Launcher: map[string]string{}, Workload: study.Workload{Nodes: 2}},
			err:   "m.yaml: workload.nodes is 2, and the local launcher runs on this machine only"},
		{description: "unknown study value", study: &study.Study{Path: "x.yaml", Launcher: map[string]string{"kind": "pbs"}},
			err: `x.yaml: launcher.kind: unknown launcher "pbs"`},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			got, err := launcherKind(&tt.opts, tt.study, tt.env)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				assert.Equal(t, exitcode.Input, exitcode.Of(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRendezvousHost(t *testing.T) {
	s := &study.Study{Launcher: map[string]string{}, Workload: study.Workload{Nodes: 1}}
	host, port, err := rendezvousHost(&launcherOptions{}, "local", s)
	require.NoError(t, err)
	assert.Equal(t, "", host, "local keeps the runner's loopback default")
	assert.Equal(t, "0", port)

	host, port, err = rendezvousHost(&launcherOptions{rdzvAddr: "127.0.0.1:29500"}, "slurm", s)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1", "29500"}, []string{host, port})

	host, _, err = rendezvousHost(&launcherOptions{rdzvIface: "lo"}, "slurm", s)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)

	host, _, err = rendezvousHost(&launcherOptions{}, "slurm", s)
	require.NoError(t, err)
	assert.NotEmpty(t, host, "the first non-loopback address, or loopback on one node")

	_, _, err = rendezvousHost(&launcherOptions{rdzvIface: "nosuch0"}, "slurm", s)
	assert.ErrorContains(t, err, "--rdzv-interface: no network interface nosuch0")
	assert.Equal(t, exitcode.Input, exitcode.Of(err))
}

func TestBatchFor(t *testing.T) {
	path := filepath.Join(repoRoot(t), "studies", "gpt", "multinode.yaml")
	s, err := study.Load(path, study.LoadOptions{})
	require.NoError(t, err)
	plan, err := study.Expand(s, study.ExpandOptions{})
	require.NoError(t, err)

	b, err := batchFor(&launcherOptions{gpusPerNode: -1, partition: "gpu"}, s, plan)
	require.NoError(t, err)
	assert.Equal(t, 2, b.Nodes)
	assert.Equal(t, 8, b.TasksPerNode)
	assert.Equal(t, 8, b.GPUsPerNode)
	assert.Equal(t, "gpu", b.Partition)
	assert.Equal(t, 240, b.TimeMinutes, "launcher.time_limit 4:00:00")
	assert.Equal(t, []string{"--exclusive"}, b.Extra)

	b, err = batchFor(&launcherOptions{gpusPerNode: 4, timeLimit: "90m"}, s, plan)
	require.NoError(t, err)
	assert.Equal(t, 4, b.GPUsPerNode)
	assert.Equal(t, 90, b.TimeMinutes)

	_, err = batchFor(&launcherOptions{gpusPerNode: -1, timeLimit: "soon"}, s, plan)
	assert.ErrorContains(t, err, `--time: time limit "soon"`)

	// no time anywhere: every launch at its timeout, plus 10 minutes
	smoke, err := study.Load(filepath.Join(repoRoot(t), "studies", "gpt", "smoke.yaml"), study.LoadOptions{})
	require.NoError(t, err)
	sp, err := study.Expand(smoke, study.ExpandOptions{})
	require.NoError(t, err)
	b, err = batchFor(&launcherOptions{gpusPerNode: -1}, smoke, sp)
	require.NoError(t, err)
	assert.Equal(t, 0, b.GPUsPerNode, "device cpu asks for no GPU")
	assert.Equal(t, 1, b.TasksPerNode)
	want := int((time.Duration(len(sp.Trials))*smoke.Workload.Timeout+10*time.Minute)/time.Minute) + 1
	assert.Equal(t, want, b.TimeMinutes)
}

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
