package provenance

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// The excerpts follow NCCL's format strings (src/enqueue.cc): 2.19 and later
// name the operation and the algorithm, newer releases append the
// communicator; 2.18 and earlier print numbers (the numbered lines are from
// NVIDIA/nccl issues #1453 and #1595).
func TestParseNCCLTuning(t *testing.T) {
	got := ReadNCCLTuning(filepath.Join("testdata", "nccl-2.28-rank0.log"))
	require.NotNil(t, got)
	assert.Equal(t, 4, got.Lines)
	assert.Equal(t, []store.NCCLChoice{
		{Op: "AllReduce", Algo: "RING", Proto: "SIMPLE", Count: 3, MinBytes: 4, MaxBytes: 104857600},
		{Op: "Broadcast", Algo: "RING", Proto: "SIMPLE", Count: 1, MinBytes: 1024, MaxBytes: 1024},
	}, got.Choices)

	old := ReadNCCLTuning(filepath.Join("testdata", "nccl-2.18-rank0.log"))
	require.NotNil(t, old)
	assert.Equal(t, []store.NCCLChoice{
		{Algo: "RING", Proto: "SIMPLE", Count: 1, MinBytes: 1026048, MaxBytes: 1026048},
		{Algo: "TREE", Proto: "LL128", Count: 2, MinBytes: 262144, MaxBytes: 262144},
	}, old.Choices)

	none, err := ParseNCCLTuning(strings.NewReader("worker: rank 1 joined\nNCCL INFO Init COMPLETE\n"))
	assert.NoError(t, err)
	assert.Nil(t, none, "a rank that is not the communicator's rank 0 prints no tuning lines")
	assert.Nil(t, ReadNCCLTuning(filepath.Join("testdata", "missing.log")))
}

// The 2.28 log forced NCCL_ALGO=Tree, yet NCCL ran every all-reduce with Ring
// (the environment's value did not take effect): not used. Its Simple
// protocol did.
func TestCheckForcedNCCL(t *testing.T) {
	rank0 := ReadNCCLTuning(filepath.Join("testdata", "nccl-2.28-rank0.log"))
	tunings := []*store.NCCLTuning{rank0, nil} // rank 1 printed none

	e := CheckForcedNCCL("nccl.algo", "Tree", tunings)
	assert.Equal(t, NCCLNotUsed, e.Status())
	assert.Equal(t, 3, e.Lines, "the broadcast is not an all-reduce")
	assert.Equal(t, 0, e.Matching)
	assert.Equal(t, []string{"RING×3"}, e.Used)
	assert.Contains(t, e.String(), "NCCL used RING×3")

	e = CheckForcedNCCL("nccl.proto", "Simple", tunings)
	assert.Equal(t, NCCLUsed, e.Status())
	assert.Equal(t, 3, e.Matching)

	assert.Equal(t, NCCLUsed, CheckForcedNCCL("nccl.algo", "Ring,Tree", tunings).Status(), "a list allows each")
	assert.Equal(t, NCCLNotUsed, CheckForcedNCCL("nccl.algo", "^Ring", tunings).Status(), "an exclusion")
	assert.Equal(t, NCCLNoEvidence, CheckForcedNCCL("nccl.proto", "LL", nil).Status())

	old := ReadNCCLTuning(filepath.Join("testdata", "nccl-2.18-rank0.log"))
	assert.Equal(t, 2, CheckForcedNCCL("nccl.proto", "LL128", []*store.NCCLTuning{old}).Matching, "numbered lines count as all-reduces")
}

func TestNCCLName(t *testing.T) {
	for in, want := range map[string]string{"NVLSTree": "NVLS_TREE", "CollnetDirect": "COLLNET_DIRECT", "CollnetChain": "COLLNET_CHAIN",
		"Simple": "SIMPLE", "LL128": "LL128", "Ring": "RING", "NVLS_TREE": "NVLS_TREE", "PAT": "PAT"} {
		assert.Equal(t, want, NCCLName(in), in)
	}
}
