package launch

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/study"
)

func TestKind(t *testing.T) {
	plain := &study.Study{Path: "s.yaml", Launcher: map[string]string{}}
	slurmStudy := &study.Study{Path: "m.yaml", Launcher: map[string]string{"kind": "slurm"}}
	inJob := []string{"SLURM_JOB_ID=12"}
	tests := []struct {
		description string
		flag        string
		submit      bool
		study       *study.Study
		env         []string
		want        string
		err         string
	}{
		{description: "default is local", study: plain, want: "local"},
		{description: "inside an allocation", study: plain, env: inJob, want: "slurm"},
		{description: "the flag wins over the allocation", flag: "local", study: plain, env: inJob, want: "local"},
		{description: "the study's launcher.kind", study: slurmStudy, env: inJob, want: "slurm"},
		{description: "slurm outside an allocation", study: slurmStudy, err: "m.yaml: launcher.kind: the slurm launcher runs trials as job steps inside an allocation"},
		{description: "submit from the study's launcher.kind", submit: true, study: slurmStudy, want: "slurm"},
		{description: "submit needs slurm", submit: true, study: plain, err: "add --launcher slurm"},
		{description: "submit with the flag", flag: "slurm", submit: true, study: plain, want: "slurm"},
		{description: "unknown flag value", flag: "ssh", study: plain, err: `--launcher: unknown launcher "ssh"`},
		{description: "multi-node needs slurm", flag: "local",
			study: &study.Study{Path: "m.yaml", Launcher: map[string]string{}, Workload: study.Workload{Nodes: 2}},
			err:   "m.yaml: workload.nodes is 2, and the local launcher runs on this machine only"},
		{description: "unknown study value", study: &study.Study{Path: "x.yaml", Launcher: map[string]string{"kind": "pbs"}},
			err: `x.yaml: launcher.kind: unknown launcher "pbs"`},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			got, err := Kind(tt.flag, tt.submit, tt.study, tt.env)
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
	host, port, err := RendezvousHost("", "", "local", s)
	require.NoError(t, err)
	assert.Equal(t, "", host, "local keeps the runner's loopback default")
	assert.Equal(t, "0", port)

	host, port, err = RendezvousHost("127.0.0.1:29500", "", "slurm", s)
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1", "29500"}, []string{host, port})

	host, _, err = RendezvousHost("", "lo", "slurm", s)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)

	host, _, err = RendezvousHost("", "", "slurm", s)
	require.NoError(t, err)
	assert.NotEmpty(t, host, "the first non-loopback address, or loopback on one node")

	_, _, err = RendezvousHost("", "nosuch0", "slurm", s)
	assert.ErrorContains(t, err, "--rdzv-interface: no network interface nosuch0")
	assert.Equal(t, exitcode.Input, exitcode.Of(err))
}

func TestBatchFor(t *testing.T) {
	path := filepath.Join("..", "studies", "gpt", "multinode.yaml")
	s, err := study.Load(path, study.LoadOptions{})
	require.NoError(t, err)
	plan, err := study.Expand(s, study.ExpandOptions{})
	require.NoError(t, err)

	b, err := BatchFor(s, plan, SubmitOptions{GPUsPerNode: -1, Partition: "gpu"})
	require.NoError(t, err)
	assert.Equal(t, 2, b.Nodes)
	assert.Equal(t, 8, b.TasksPerNode)
	assert.Equal(t, 8, b.GPUsPerNode)
	assert.Equal(t, "gpu", b.Partition)
	assert.Equal(t, 240, b.TimeMinutes, "launcher.time_limit 4:00:00")
	assert.Equal(t, []string{"--exclusive"}, b.Extra)
	assert.False(t, b.Exclusive, "the study's own --exclusive stands alone")
	s.Launcher["extra_args"] = "--cpus-per-gpu=12"
	b, err = BatchFor(s, plan, SubmitOptions{GPUsPerNode: -1})
	require.NoError(t, err)
	assert.False(t, b.Exclusive, "the study chose its CPUs")
	s.Launcher["extra_args"] = ""
	b, err = BatchFor(s, plan, SubmitOptions{GPUsPerNode: -1})
	require.NoError(t, err)
	assert.True(t, b.Exclusive, "a GPU job holds whole nodes: every core for the steps to split")

	b, err = BatchFor(s, plan, SubmitOptions{GPUsPerNode: 16, TimeLimit: "90m"})
	require.NoError(t, err)
	assert.Equal(t, 16, b.GPUsPerNode)
	assert.Equal(t, 90, b.TimeMinutes)
	// fewer GPUs a node than the plan's trials need: every trial would be
	// unsupported inside the job, after its queue wait
	_, err = BatchFor(s, plan, SubmitOptions{GPUsPerNode: 4})
	require.Error(t, err)
	assert.Equal(t, 2, exitcode.Of(err))
	assert.ErrorContains(t, err, "--gpus-per-node 4: the study's largest trial needs 8 GPUs a node")

	_, err = BatchFor(s, plan, SubmitOptions{GPUsPerNode: -1, TimeLimit: "soon"})
	assert.ErrorContains(t, err, `--time: time limit "soon"`)

	// no time anywhere: every launch at its timeout, plus 10 minutes
	smoke, err := study.Load(filepath.Join("..", "studies", "gpt", "smoke.yaml"), study.LoadOptions{})
	require.NoError(t, err)
	sp, err := study.Expand(smoke, study.ExpandOptions{})
	require.NoError(t, err)
	b, err = BatchFor(smoke, sp, SubmitOptions{GPUsPerNode: -1})
	require.NoError(t, err)
	assert.Equal(t, 0, b.GPUsPerNode, "device cpu asks for no GPU")
	assert.False(t, b.Exclusive, "a CPU job shares its node")
	assert.Equal(t, 1, b.TasksPerNode)
	want := int((time.Duration(len(sp.Trials)*smoke.Workload.MaxLaunches())*smoke.Workload.Timeout+10*time.Minute)/time.Minute) + 1
	assert.Equal(t, want, b.TimeMinutes, "every launch a trial may get")

	// --partition and --account become #SBATCH lines: checked like the
	// study's launcher settings, a line break is refused (issue 21, defect 1)
	for _, o := range []SubmitOptions{{GPUsPerNode: -1, Partition: "debug\ntouch /tmp/x"}, {GPUsPerNode: -1, Account: "a\nb"}} {
		_, err = BatchFor(smoke, sp, o)
		require.Error(t, err)
		assert.Equal(t, exitcode.Input, exitcode.Of(err))
	}
}
