package runner

import (
	"github.com/casestudy/casestudy/store"
)

// splitBucketSkew splits each data-parallel bucket's time into transfer and
// arrival skew across the ranks of the world: for measured step i and bucket
// j, every rank's TransferMS is the least time any rank spent in that
// collective and SkewMS the most less the least; TransferBusBWGBs is
// nccl-tests' bus bandwidth of TransferMS (all-reduce 2(n-1)/n, all-gather
// (n-1)/n). A rank's own MS keeps the wait for late peers (the start event
// fires when the rank arrives, not when the last one does), which biases its
// busbw low. Nothing changes unless every rank reported the same steps and
// buckets.
func splitBucketSkew(ranks []store.RankRecord) {
	n := len(ranks)
	if n < 2 {
		return
	}
	steps := len(ranks[0].Steps)
	for _, r := range ranks {
		if len(r.Steps) != steps {
			return
		}
		for i := range r.Steps {
			if len(r.Steps[i].Buckets) != len(ranks[0].Steps[i].Buckets) {
				return
			}
		}
	}
	world := float64(n)
	for i := 0; i < steps; i++ {
		for j := range ranks[0].Steps[i].Buckets {
			lo, hi := ranks[0].Steps[i].Buckets[j].MS, ranks[0].Steps[i].Buckets[j].MS
			for _, r := range ranks[1:] {
				ms := r.Steps[i].Buckets[j].MS
				lo, hi = min(lo, ms), max(hi, ms)
			}
			for _, r := range ranks {
				b := &r.Steps[i].Buckets[j]
				b.TransferMS, b.SkewMS = lo, hi-lo
				if lo > 0 {
					factor := 2 * (world - 1) / world
					if b.Op == "all_gather" {
						factor = (world - 1) / world
					}
					b.TransferBusBWGBs = float64(b.Bytes) / (lo * 1e6) * factor
				}
			}
		}
	}
}
