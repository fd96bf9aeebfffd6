package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
)

// namedNVML remembers which devices it was asked for.
type namedNVML struct{ asked [][]string }

func (f *namedNVML) Info() (provenance.GPUInfo, error) { return provenance.GPUInfo{}, nil }
func (f *namedNVML) Devices(names []string) []provenance.Device {
	f.asked = append(f.asked, names)
	return []provenance.Device{&constDevice{start: time.Now()}}
}

// TestRankGPUFromItsOwnDevice: on Slurm (ranks pick their device from
// SLURM_LOCALID) the record's gpu is the UUID the rank reported, not the
// runner's guess, and once every rank reported, the sampler asks NVML for
// the ranks' GPUs; a local launch keeps the CUDA_VISIBLE_DEVICES entry the
// runner gave the rank.
func TestRankGPUFromItsOwnDevice(t *testing.T) {
	for _, slurm := range []bool{true, false} {
		nv := &namedNVML{}
		o := &Options{Machine: &Machine{Device: "cuda", NVML: nv}, Launcher: launch.Local{}}
		if slurm {
			o.Launcher = &launch.Slurm{}
		}
		l := &launchRun{sampler: provenance.StartSampler(nv.Devices([]string{"0", "1"}), time.Hour)}
		nv.asked = nil
		w := &watcher{o: o, l: l}
		for k, guess := range []string{"0", "1"} {
			w.ranks = append(w.ranks, &rankState{rec: store.RankRecord{Rank: k, GPU: guess}})
		}
		w.rankInfo(w.ranks[0], &engine.Info{GPUUUID: "GPU-c", PCIBusID: "00000000:1B:00.0"})
		assert.Empty(t, nv.asked, "not before every rank reported")
		w.rankInfo(w.ranks[1], &engine.Info{GPUUUID: "GPU-d", PCIBusID: "00000000:1C:00.0"})
		l.sampler.Stop()
		if slurm {
			assert.Equal(t, "GPU-c", w.ranks[0].rec.GPU)
			assert.Equal(t, "GPU-d", w.ranks[1].rec.GPU)
			assert.Equal(t, [][]string{{"GPU-c", "GPU-d"}}, nv.asked)
		} else {
			assert.Equal(t, "0", w.ranks[0].rec.GPU)
			assert.Equal(t, "1", w.ranks[1].rec.GPU)
			assert.Empty(t, nv.asked)
		}
		assert.Equal(t, "00000000:1C:00.0", w.ranks[1].rec.Info.PCIBusID, "every rank's identity is in its record")
	}
}
