package runner

import (
	"path/filepath"

	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
)

// transportEvidence records how each rank's NCCL channels connected (its
// log's INIT lines) and taints a completed launch whose intra-node channels
// fell back to host memory on an NVLink host, unless the trial itself turns
// peer-to-peer off (nccl.p2p_disable, nccl.p2p_level): then SHM is what it
// measures.
func (r *Runner) transportEvidence(l *launchRun, res *repeatResult) {
	var ts []*store.NCCLTransport
	for k := range res.Rec.Ranks {
		t := provenance.ReadNCCLTransport(filepath.Join(r.opts.Writer.Dir, store.LogName(l.sp.Trial.ID, k, l.rep)))
		res.Rec.Ranks[k].NCCLTransport = t
		ts = append(ts, t)
	}
	if res.Rec.Outcome != store.OK || res.Rec.Tainted != "" || forcesNoP2P(l.sp.Trial.Knobs) {
		return
	}
	if why := provenance.TransportTaint(ts, r.opts.Machine.NVLink); why != "" {
		res.Rec.Tainted = why
	}
}

// forcesNoP2P says whether a trial's knobs keep NCCL off peer-to-peer on
// purpose.
func forcesNoP2P(values map[string]string) bool {
	return values["nccl.p2p_disable"] == "true" || !knobs.Unforced(values["nccl.p2p_level"])
}
