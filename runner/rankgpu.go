package runner

import (
	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/launch"
)

// ranksPickDevice says whether a launch's ranks pick their own device (on
// Slurm every rank sees its node's GPUs and takes SLURM_LOCALID's), so the
// runner's device entries are only its guess; a local launch gives each
// rank its GPU through CUDA_VISIBLE_DEVICES.
func (o *Options) ranksPickDevice() bool {
	_, slurm := o.Launcher.(*launch.Slurm)
	return slurm
}

// rankInfo keeps a rank's cs_info. Where the rank picked its own device, the
// record's gpu becomes the device the rank reported (its UUID, a valid
// CUDA_VISIBLE_DEVICES entry), and once every rank reported, the GPU sampler
// follows the ranks' own GPUs, those NVML on the runner's node knows (on
// several nodes, the other nodes' GPUs are not sampled).
func (w *watcher) rankInfo(st *rankState, info *engine.Info) {
	st.rec.Info = info
	if info == nil || info.GPUUUID == "" || !w.o.ranksPickDevice() {
		return
	}
	st.rec.GPU = info.GPUUUID
	var uuids []string
	for _, rs := range w.ranks {
		if rs.rec.Info == nil || rs.rec.Info.GPUUUID == "" {
			return
		}
		uuids = append(uuids, rs.rec.Info.GPUUUID)
	}
	if w.o.Machine.NVML != nil && w.l.sampler != nil {
		w.l.sampler.Retarget(w.o.Machine.NVML.Devices(uniqueNonEmpty(uuids)))
	}
}
