package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/study"
)

// TestAutoInheritsDefaultUnsets: an auto knob leaves the site's variable in
// the ranks' environment, default removes it; the manifest's inherited_env
// names what some trial inherits and the run warns about each auto knob
// whose variable the environment sets.
func TestAutoInheritsDefaultUnsets(t *testing.T) {
	env := []string{"PATH=/bin", "NCCL_IB_HCA=mlx5_0,mlx5_1", "NCCL_SOCKET_IFNAME=ib0", "NCCL_ALGO=Tree",
		"CUDA_VISIBLE_DEVICES=0,1", "CUDA_DEVICE_MAX_CONNECTIONS=1", "OMP_NUM_THREADS=4"}
	plan := &study.Plan{Trials: []study.Trial{
		{ID: "a", Knobs: map[string]string{"nccl.ib_hca": "auto", "nccl.socket_ifname": "default", "nccl.algo": "auto"}},
		{ID: "b", Knobs: map[string]string{"nccl.ib_hca": "auto", "nccl.socket_ifname": "default", "nccl.algo": "Ring"},
			Changed: []string{"nccl.algo"}},
	}}
	s := &study.Study{Model: study.Model{Family: "gpt", Preset: "tiny"}, Workload: study.Workload{GPUs: 2, Steps: 1}}
	for _, tr := range plan.Trials {
		sp, err := buildSpec(s, tr, &Machine{Device: "cuda", GPUs: []string{"0", "1"}})
		require.NoError(t, err)
		rank := launch.BuildEnv(env, sp.Set, sp.Unset)
		v, ok := launch.LookupEnv(rank, "NCCL_IB_HCA")
		assert.True(t, ok, "trial %s: auto inherits the site's NCCL_IB_HCA", tr.ID)
		assert.Equal(t, "mlx5_0,mlx5_1", v)
		_, ok = launch.LookupEnv(rank, "NCCL_SOCKET_IFNAME")
		assert.False(t, ok, "trial %s: default unsets NCCL_SOCKET_IFNAME", tr.ID)
	}

	assert.Equal(t, map[string]string{"NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_ALGO": "Tree", "CUDA_DEVICE_MAX_CONNECTIONS": "1"},
		InheritedEnv(env, plan), "trial a inherits NCCL_ALGO; nobody inherits NCCL_SOCKET_IFNAME; CUDA_VISIBLE_DEVICES is per rank")

	w := InheritWarnings(env, plan)
	require.Len(t, w, 3, "%q", w)
	assert.Contains(t, w[0], "cuda.device_max_connections is auto in 2 of 2 trials: they inherit CUDA_DEVICE_MAX_CONNECTIONS=1")
	assert.Contains(t, w[1], "nccl.algo is auto in 1 of 2 trials: they inherit NCCL_ALGO=Tree")
	assert.Contains(t, w[1], "its auto trials measure this value, not the library's own choice")
	assert.Contains(t, w[2], "nccl.ib_hca is auto in 2 of 2 trials")
	assert.Contains(t, w[2], "nccl.ib_hca: default unsets it")
	assert.NotContains(t, w[2], "sweeps")

	assert.Nil(t, InheritedEnv([]string{"PATH=/bin"}, plan))
	assert.Empty(t, InheritWarnings([]string{"PATH=/bin"}, plan))
}
