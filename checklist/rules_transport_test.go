package checklist

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// withTransport gives every rank of every repeat of the trials' records the
// channel connections conns.
func withTransport(run *store.Run, conns map[string]int) *store.Run {
	for i := range run.Trials {
		for j := range run.Trials[i].Repeats {
			for k := range run.Trials[i].Repeats[j].Ranks {
				run.Trials[i].Repeats[j].Ranks[k].NCCLTransport = &store.NCCLTransport{Connections: conns}
			}
		}
	}
	return run
}

func TestTransportFallbackRule(t *testing.T) {
	two := []spec{{id: "a", thr: 1, stepMS: 1, ranks: 2}}
	res := evalOne(t, withTransport(mkRun(two, onGPUs(2, "NVIDIA H100 80GB HBM3", 80<<30, 18, topoNVSwitch)), map[string]int{"SHM": 2}),
		"nccl-transport-fallback", Config{})
	assert.Equal(t, Finding, res.Status, res.Message)
	require.NotEmpty(t, res.Evidence)
	assert.Contains(t, res.Evidence[0], "SHM 4")
	assert.Equal(t, []string{"a"}, res.Trials)

	res = evalOne(t, withTransport(mkRun(two, onGPUs(2, "NVIDIA H100 80GB HBM3", 80<<30, 18, topoNVSwitch)), map[string]int{"P2P/CUMEM": 2}),
		"nccl-transport-fallback", Config{})
	assert.Equal(t, Pass, res.Status, res.Message)

	res = evalOne(t, withTransport(mkRun(two, onGPUs(2, "NVIDIA L4", 24<<30, 0, topoPCIe)), map[string]int{"SHM": 2}),
		"nccl-transport-fallback", Config{})
	assert.Equal(t, NotApplicable, res.Status, "no NVLink: SHM may be right")

	res = evalOne(t, withTransport(mkRun([]spec{{id: "a", thr: 1, stepMS: 1, ranks: 2, set: map[string]string{"nccl.p2p_disable": "true"}}},
		onGPUs(2, "NVIDIA H100 80GB HBM3", 80<<30, 18, topoNVSwitch)), map[string]int{"SHM": 2}), "nccl-transport-fallback", Config{})
	assert.Equal(t, NotApplicable, res.Status, "P2P off on purpose")

	res = evalOne(t, mkRun(two, onGPUs(2, "NVIDIA H100 80GB HBM3", 80<<30, 18, topoNVSwitch)), "nccl-transport-fallback", Config{})
	assert.Equal(t, NotApplicable, res.Status, "no transport lines")
}
