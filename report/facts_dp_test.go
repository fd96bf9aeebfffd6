package report

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

func rankInfo(family string, world int, uuid, pci string) *engine.Info {
	return &engine.Info{Description: engine.Description{Family: family}, WorldSize: world, GPUUUID: uuid, PCIBusID: pci}
}

// TestRankGPUsFact: the report's facts name each GPU the ranks reported,
// with its PCI bus id, node and ranks, over every launch; nothing on the CPU.
func TestRankGPUsFact(t *testing.T) {
	run := &store.Run{Trials: []store.TrialRecord{
		{ID: "a", Repeats: []store.RepeatRecord{{Ranks: []store.RankRecord{
			{Rank: 0, Node: "n1", Info: rankInfo("gpt", 2, "GPU-aaaa", "00000000:1B:00.0")},
			{Rank: 1, Node: "n2", Info: rankInfo("gpt", 2, "GPU-bbbb", "00000000:1B:00.0")},
		}}}},
		{ID: "b", Repeats: []store.RepeatRecord{{Ranks: []store.RankRecord{
			{Rank: 0, Node: "n1", Info: rankInfo("gpt", 1, "GPU-aaaa", "00000000:1B:00.0")},
		}}}},
	}}
	want := []string{"GPU-aaaa (PCI 00000000:1B:00.0, node n1): rank 0", "GPU-bbbb (PCI 00000000:1B:00.0, node n2): rank 1"}
	assert.Equal(t, want, rankGPUs(run))
	s := &Summary{Provenance: provenance(run)}
	assert.Contains(t, provenanceRows(s), [2]string{"ranks' GPUs", want[0] + "; " + want[1]})

	cpu := &store.Run{Trials: []store.TrialRecord{{ID: "a", Repeats: []store.RepeatRecord{{Ranks: []store.RankRecord{
		{Rank: 0, Info: rankInfo("gpt", 2, "", "")}, {Rank: 1, Info: rankInfo("gpt", 2, "", "")}}}}}}}
	assert.Empty(t, rankGPUs(cpu))
	for _, row := range provenanceRows(&Summary{Provenance: provenance(cpu)}) {
		assert.NotEqual(t, "ranks' GPUs", row[0])
	}
}

// TestBNBufferFact: a report whose ResNet trials ran data parallel states
// that BatchNorm buffers are not broadcast (unlike DDP's default); one
// without such trials (ResNet on one rank, GPT on two) says nothing of it.
func TestBNBufferFact(t *testing.T) {
	trial := func(id, family string, world int) store.TrialRecord {
		var rs []store.RankRecord
		for k := 0; k < world; k++ {
			rs = append(rs, store.RankRecord{Rank: k, Info: rankInfo(family, world, "", "")})
		}
		return store.TrialRecord{ID: id, Repeats: []store.RepeatRecord{{Ranks: rs}}}
	}
	none := &store.Run{Trials: []store.TrialRecord{trial("one", "resnet50", 1), trial("gpt2", "gpt", 2)}}
	for _, row := range provenanceRows(&Summary{Provenance: provenance(none)}) {
		assert.NotEqual(t, "BatchNorm buffers", row[0])
	}
	dp := &store.Run{Trials: append(none.Trials, trial("dp2", "resnet50", 2), trial("dp4", "resnet50", 4))}
	var fact string
	for _, row := range provenanceRows(&Summary{Provenance: provenance(dp)}) {
		if row[0] == "BatchNorm buffers" {
			fact = row[1]
		}
	}
	assert.Contains(t, fact, "BatchNorm running statistics never broadcast")
	assert.Contains(t, fact, "broadcast_buffers=True")
	assert.Contains(t, fact, "parameters broadcast from rank 0 once")
	assert.Contains(t, fact, "trials: dp2, dp4")
}

// TestRankLibrariesFact: the report states the cuDNN and the library files
// the ranks loaded, each distinct copy once (two ranks with different files
// both show), and compare lists a change of them between runs; nothing on
// records without them.
func TestRankLibrariesFact(t *testing.T) {
	lib := func(cudnn, path string) *engine.Info {
		i := rankInfo("bert", 2, "GPU-a", "")
		i.CuDNNRuntime = cudnn
		i.Libraries = map[string]string{"libcudnn.so.9": path, "libnccl.so.2": "/w/nvidia/nccl/lib/libnccl.so.2"}
		return i
	}
	wheel, system := "/w/nvidia/cudnn/lib/libcudnn.so.9", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"
	run := func(second *engine.Info) *store.Run {
		return &store.Run{Trials: []store.TrialRecord{{ID: "a", Repeats: []store.RepeatRecord{{Ranks: []store.RankRecord{
			{Rank: 0, Info: lib("91900", wheel)}, {Rank: 1, Info: second}}}}}}}
	}
	same := &Summary{Provenance: provenance(run(lib("91900", wheel)))}
	rows := provenanceRows(same)
	assert.Contains(t, rows, [2]string{"cuDNN the ranks loaded", "9.19.0"})
	assert.Contains(t, rows, [2]string{"library files the ranks loaded",
		"libcudnn.so.9 " + wheel + "; libnccl.so.2 /w/nvidia/nccl/lib/libnccl.so.2"})
	mixed := &Summary{Provenance: provenance(run(lib("91300", system)))}
	assert.Contains(t, provenanceRows(mixed), [2]string{"cuDNN the ranks loaded", "9.13.0, 9.19.0"})
	assert.Contains(t, provenanceRows(mixed), [2]string{"library files the ranks loaded",
		"libcudnn.so.9 " + system + "; libcudnn.so.9 " + wheel + "; libnccl.so.2 /w/nvidia/nccl/lib/libnccl.so.2"})
	changed := changedBetween(same, mixed)
	var what []string
	for _, c := range changed {
		what = append(what, c.What)
	}
	assert.Equal(t, []string{"cuDNN the ranks loaded", "library files the ranks loaded"}, what)
	old := &Summary{Provenance: provenance(&store.Run{Trials: []store.TrialRecord{{ID: "a", Repeats: []store.RepeatRecord{
		{Ranks: []store.RankRecord{{Rank: 0, Info: rankInfo("bert", 2, "GPU-a", "")}, {Rank: 1, Info: rankInfo("bert", 2, "GPU-a", "")}}}}}}})}
	for _, row := range provenanceRows(old) {
		assert.NotContains(t, row[0], "loaded", "a record from before the libraries were recorded")
	}
}
