package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

func loadStudy(t *testing.T, text string) (*study.Study, *study.Plan) {
	t.Helper()
	return loadPlan(t, writeStudy(t, t.TempDir(), text))
}

func TestBuildSpecPlacement(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		text        string
		machine     Machine
		ranks       int
		world       int
		backend     string
		devices     []string
		unsupported string
	}{
		{"cpu ranks use gloo", "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 2}\n",
			Machine{Device: "cpu"}, 2, 2, "gloo", []string{"", ""}, ""},
		{"one rank needs no communicator", "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1}\n",
			Machine{Device: "cpu"}, 1, 1, "", []string{""}, ""},
		{"one GPU per rank, nccl", "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 2}\n",
			Machine{Device: "cuda", GPUs: []string{"4", "5"}}, 2, 2, "nccl", []string{"4", "5"}, ""},
		{"procs_per_gpu 2: independent replicas sharing GPUs", "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 2}\nbaseline: {procs_per_gpu: 2}\n",
			Machine{Device: "cuda", GPUs: []string{"0", "1"}}, 4, 1, "", []string{"0", "0", "1", "1"}, ""},
		{"too few GPUs for this trial", "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 2}\n",
			Machine{Device: "cuda", GPUs: []string{"0"}}, 2, 2, "nccl", []string{"0", ""}, "needs 2 GPUs"},
		{"mps without the control binary", "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 1}\nbaseline: {mps: true, procs_per_gpu: 2}\n",
			Machine{Device: "cuda", GPUs: []string{"0"}}, 2, 1, "", []string{"0", "0"}, "nvidia-cuda-mps-control not found"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s, p := loadStudy(t, tc.text)
			require.NotEmpty(t, p.Trials)
			sp, err := buildSpec(s, p.Trials[0], &tc.machine)
			require.NoError(t, err)
			assert.Equal(t, tc.ranks, sp.Ranks)
			assert.Equal(t, tc.devices, sp.Devices)
			for r, c := range sp.Configs {
				assert.Equal(t, tc.world, c.Dist.WorldSize)
				assert.Equal(t, tc.backend, c.Dist.Backend)
				if tc.world > 1 {
					assert.Equal(t, r, c.Dist.Rank)
				} else {
					assert.Zero(t, c.Dist.Rank)
				}
				assert.Equal(t, tc.machine.Device, c.Device)
			}
			if tc.unsupported == "" {
				assert.Empty(t, sp.Unsupported)
			} else {
				assert.Contains(t, sp.Unsupported, tc.unsupported)
			}
		})
	}
}

func TestResolveDevice(t *testing.T) {
	gpuStudy := "name: s\nmodel: {family: bert, preset: tiny}\nworkload: {device: cuda, gpus: 8}\n"
	s, p := loadStudy(t, gpuStudy)
	m := &Machine{}
	err := resolveDevice(s, p, m)
	require.Error(t, err, "a GPU study on a machine without GPUs stops before the first trial")
	assert.Contains(t, err.Error(), "try studies/bert/smoke.yaml")

	m = &Machine{GPUs: []string{"0"}}
	err = resolveDevice(s, p, m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs 8 GPUs per trial; 1 visible")

	m = &Machine{GPUs: make([]string, 8)}
	require.NoError(t, resolveDevice(s, p, m))
	assert.Equal(t, "cuda", m.Device)

	s, p = loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: auto, gpus: 2, ranks: 2}\n")
	m = &Machine{}
	require.NoError(t, resolveDevice(s, p, m))
	assert.Equal(t, "cpu", m.Device, "auto falls back to CPU ranks")
	m = &Machine{GPUs: []string{"0", "1"}}
	require.NoError(t, resolveDevice(s, p, m))
	assert.Equal(t, "cuda", m.Device)
	sp, err := buildSpec(s, p.Trials[0], &Machine{Device: "cpu"})
	require.NoError(t, err)
	assert.Equal(t, 2, sp.Ranks, "workload.ranks on the CPU fallback")
}

func TestChecksumsDisagree(t *testing.T) {
	sp := &trialSpec{Configs: []engine.Config{{Dist: engine.DistConfig{WorldSize: 2}}}}
	same := []store.RankRecord{{Rank: 0, Checksum: &engine.Checksum{Hash: "aa"}}, {Rank: 1, Checksum: &engine.Checksum{Hash: "aa"}}}
	differ := []store.RankRecord{{Rank: 0, Checksum: &engine.Checksum{Hash: "aa", Sum: 1}}, {Rank: 1, Checksum: &engine.Checksum{Hash: "bb", Sum: 2}}}
	assert.Empty(t, checksumsDisagree(sp, same))
	assert.Contains(t, checksumsDisagree(sp, differ), "rank 1 bb")
	sp.Configs[0].Pipeline.Stages = 2 // stages hold different parameters
	assert.Empty(t, checksumsDisagree(sp, differ))
	sp = &trialSpec{Configs: []engine.Config{{Dist: engine.DistConfig{WorldSize: 1}}}}
	assert.Empty(t, checksumsDisagree(sp, differ), "replicas (procs_per_gpu) are independent")

	// pipeline x DP: 2 stages x 2 replicas; stage s is held by ranks s and 2+s.
	sp = &trialSpec{Configs: []engine.Config{{Dist: engine.DistConfig{WorldSize: 4}, Pipeline: engine.PipelineConfig{Stages: 2}}}}
	pp := func(rank, stage int, hash string) store.RankRecord {
		return store.RankRecord{Rank: rank, Info: &engine.Info{Pipeline: &engine.PipelineInfo{Stages: 2, Stage: stage}},
			Checksum: &engine.Checksum{Hash: hash}}
	}
	replicas := []store.RankRecord{pp(0, 0, "s0"), pp(1, 1, "s1"), pp(2, 0, "s0"), pp(3, 1, "s1")}
	assert.Empty(t, checksumsDisagree(sp, replicas), "stages differ from each other, replicas agree")
	replicas[3] = pp(3, 1, "xx")
	assert.Equal(t, "parameters differ across the data-parallel replicas of pipeline stage 1 after the last step: rank 1 s1 (sum 0), rank 3 xx (sum 0)",
		checksumsDisagree(sp, replicas))
}

// TestNCCLDebugSettings: a study that sweeps an nccl.* knob gives every
// trial the same NCCL debug settings (sweepsNCCL); an NCCL communicator
// without such a sweep gets the init-only subsystems that name the
// transport; one rank or CPU ranks get none; nccl.debug set by the study
// stands.
func TestNCCLDebugSettings(t *testing.T) {
	gpu2 := &Machine{Device: "cuda", GPUs: []string{"0", "1"}}
	head := "name: s\nmodel: {family: gpt, preset: tiny}\n"
	_, p := loadStudy(t, head+"workload: {device: cuda, gpus: 2}\nsweep: {strategy: list, trials: [{nccl.algo: Ring}, {nccl.algo: auto}]}\n")
	assert.True(t, sweepsNCCL(p))
	_, p = loadStudy(t, head+"workload: {device: cuda, gpus: 2}\nsweep: {strategy: list, trials: [{ddp.bucket_mb: 5}, {ddp.bucket_mb: 25}]}\n")
	assert.False(t, sweepsNCCL(p))
	_, p = loadStudy(t, head+"workload: {device: cuda, gpus: 2}\nbaseline: {nccl.algo: Ring}\nsweep: {strategy: list, trials: [{nccl.debug: WARN}, {nccl.debug: INFO}]}\n")
	assert.False(t, sweepsNCCL(p), "nccl.debug is the study's own logging, and a forced baseline is in every trial alike")

	s, p := loadStudy(t, head+"workload: {device: cuda, gpus: 2}\nsweep: {strategy: list, trials: [{ddp.bucket_mb: 5}]}\n")
	sp, err := buildSpec(s, p.Trials[0], gpu2)
	require.NoError(t, err)
	assert.True(t, sp.NCCLTransport)
	assert.False(t, sp.NCCLEvidence)
	assert.Equal(t, "INFO", sp.Set[ncclDebugVar])
	assert.Equal(t, provenance.NCCLTransportSubsys, sp.ncclDebugSubsys())
	assert.NotContains(t, sp.ncclDebugSubsys(), "TUNING", "nothing logged per collective")

	s, p = loadStudy(t, head+"workload: {device: cuda, gpus: 1}\n")
	sp, err = buildSpec(s, p.Trials[0], gpu2)
	require.NoError(t, err)
	assert.False(t, sp.NCCLTransport, "one rank: no communicator")
	assert.Empty(t, sp.ncclDebugSubsys())
	_, set := sp.Set[ncclDebugVar]
	assert.False(t, set)

	s, p = loadStudy(t, head+"workload: {device: cuda, gpus: 2}\nbaseline: {nccl.debug: WARN}\n")
	sp, err = buildSpec(s, p.Trials[0], gpu2)
	require.NoError(t, err)
	assert.Equal(t, "WARN", sp.Set[ncclDebugVar], "the study's nccl.debug stands")
}
