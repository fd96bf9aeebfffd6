package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

func TestSplitBucketSkew(t *testing.T) {
	rank := func(r int, ms ...float64) store.RankRecord {
		var bs []engine.BucketMetrics
		for _, m := range ms {
			bs = append(bs, engine.BucketMetrics{Op: "all_reduce", Bytes: 4e6, MS: m})
		}
		return store.RankRecord{Rank: r, Steps: []engine.StepMetrics{{Buckets: bs}}}
	}
	// rank 0 arrived first at bucket 0 and waited 3 ms for rank 3; bucket 1 had no skew.
	ranks := []store.RankRecord{rank(0, 5, 2), rank(1, 3, 2), rank(2, 2.5, 2), rank(3, 2, 2)}
	splitBucketSkew(ranks)
	for _, r := range ranks {
		b0, b1 := r.Steps[0].Buckets[0], r.Steps[0].Buckets[1]
		assert.Equal(t, 2.0, b0.TransferMS, "rank %d", r.Rank)
		assert.Equal(t, 3.0, b0.SkewMS, "rank %d", r.Rank)
		assert.InDelta(t, 4e6/2e6*2*3/4, b0.TransferBusBWGBs, 1e-12, "rank %d: 2 GB/s algbw x 2(n-1)/n", r.Rank)
		assert.Equal(t, 0.0, b1.SkewMS)
		assert.Equal(t, b0.TransferBusBWGBs, b0.BusBW())
	}
	assert.Equal(t, 5.0, ranks[0].Steps[0].Buckets[0].MS, "the rank's own time stays")

	// Ranks that disagree on the buckets are left alone.
	odd := []store.RankRecord{rank(0, 5, 2), rank(1, 3)}
	splitBucketSkew(odd)
	assert.Zero(t, odd[0].Steps[0].Buckets[0].TransferMS)
	assert.Equal(t, odd[0].Steps[0].Buckets[0].BusBWGBs, odd[0].Steps[0].Buckets[0].BusBW())
}
