package checklist

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// TestUsedGPUsFromRankUUIDs: the topology rules take the GPUs a run used from
// the UUIDs its ranks reported (Slurm: the runner's device entries are only
// its guess), then from the device entries; a GPU they cannot place (another
// node's UUID) means every GPU of the matrix.
func TestUsedGPUsFromRankUUIDs(t *testing.T) {
	m, err := parseTopo(topoNVSwitch)
	require.NoError(t, err)
	host := func(man *store.Manifest) {
		for i, u := range []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d"} {
			man.Host.GPUs = append(man.Host.GPUs, store.GPU{Index: i, Name: "NVIDIA H100", UUID: u})
		}
	}
	ranks := func(entries ...[2]string) *store.Run {
		run := mkRun([]spec{{}}, host)
		var rs []store.RankRecord
		for k, e := range entries {
			rk := store.RankRecord{Rank: k, GPU: e[0]}
			if e[1] != "" {
				rk.Info = &engine.Info{GPUUUID: e[1]}
			}
			rs = append(rs, rk)
		}
		run.Trials[0].Repeats = []store.RepeatRecord{{Ranks: rs}}
		return run
	}
	// The runner guessed GPUs 0 and 1; the ranks ran on GPUs 2 and 3.
	assert.Equal(t, []string{"GPU2", "GPU3"}, newRunView(ranks([2]string{"0", "GPU-c"}, [2]string{"1", "GPU-d"})).usedGPUs(m))
	// Without cs_info: the entries, indexes or UUIDs.
	assert.Equal(t, []string{"GPU0", "GPU1"}, newRunView(ranks([2]string{"0", ""}, [2]string{"1", ""})).usedGPUs(m))
	assert.Equal(t, []string{"GPU1", "GPU3"}, newRunView(ranks([2]string{"GPU-b", ""}, [2]string{"GPU-d", ""})).usedGPUs(m))
	// A rank on a GPU this host does not have: every GPU.
	assert.Equal(t, m.GPUs(), newRunView(ranks([2]string{"0", "GPU-c"}, [2]string{"1", "GPU-elsewhere"})).usedGPUs(m))
}
