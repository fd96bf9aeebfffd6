package bench

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSizes(t *testing.T) {
	tests := []struct {
		description string
		in          string
		want        []int64
		wantErr     bool
	}{
		{"binary suffixes", "1M,4m,512K,1G", []int64{1 << 20, 4 << 20, 512 << 10, 1 << 30}, false},
		{"plain bytes with spaces", "1024, 8", []int64{1024, 8}, false},
		{"not a number", "1X", nil, true},
		{"zero", "0", nil, true},
		{"empty entry", "1M,,4M", nil, true},
		{"not whole fp32 values", "6", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			got, err := ParseSizes(tt.in)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCombineRanks(t *testing.T) {
	var ranks []rankAnswer
	require.NoError(t, json.Unmarshal([]byte(`[
	 {"backend":"nccl","version":"2.21.5","world_size":4,"rank":0,"device":"cuda:0",
	  "results":[{"bytes":4000000,"count":1000000,"ms":[1.0,2.0,3.0]}]},
	 {"rank":1,"results":[{"bytes":4000000,"count":1000000,"ms":[1.5,1.0,1.0]}]},
	 {"rank":2,"results":[{"bytes":4000000,"count":1000000,"ms":[1.0,1.0,1.0]}]},
	 {"rank":3,"results":[{"bytes":4000000,"count":1000000,"ms":[1.0,1.0,4.0]}]}]`), &ranks))
	res, err := combineRanks(ranks, AllReduce{Iters: 3, Warmup: 1})
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
	row := res.Rows[0]
	// per iteration: least over ranks 1, 1, 1; most 1.5, 2, 4; skew 0.5, 1, 3
	assert.Equal(t, 1.0, row.MS, "transfer: median of the least over ranks")
	assert.Equal(t, 1.0, row.SkewMS, "arrival skew: median of most - least")
	assert.Equal(t, 2.0, row.SlowestMS, "the slowest rank's median")
	assert.Equal(t, 1.0, row.MinMS)
	assert.Equal(t, 1.0, row.MaxMS)
	assert.InDelta(t, 4.0, row.AlgBWGBs, 1e-12)       // 4e6 B / 1 ms
	assert.InDelta(t, 4.0*2*3/4, row.BusBWGBs, 1e-12) // 2(n-1)/n with n = 4
	assert.Equal(t, ModeSync, res.Mode)

	ranks[2].Results[0].MS = ranks[2].Results[0].MS[:2]
	_, err = combineRanks(ranks, AllReduce{Iters: 3})
	assert.Error(t, err)
}

// TestCombineRanksNCCLTestsMode: back-to-back loops give one average per rank;
// the transfer time is the least, the skew the spread.
func TestCombineRanksNCCLTestsMode(t *testing.T) {
	var ranks []rankAnswer
	require.NoError(t, json.Unmarshal([]byte(`[
	 {"rank":0,"mode":"nccl-tests","results":[{"bytes":8000000,"count":2000000,"ms":[],"avg_ms":2.5}]},
	 {"rank":1,"results":[{"bytes":8000000,"count":2000000,"ms":[],"avg_ms":2.0}]},
	 {"rank":2,"results":[{"bytes":8000000,"count":2000000,"ms":[],"avg_ms":3.0}]}]`), &ranks))
	res, err := combineRanks(ranks, AllReduce{Iters: 20, Mode: ModeNCCLTests})
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
	row := res.Rows[0]
	assert.Equal(t, 2.0, row.MS)
	assert.Equal(t, 1.0, row.SkewMS)
	assert.Equal(t, 3.0, row.SlowestMS)
	assert.InDelta(t, 4.0, row.AlgBWGBs, 1e-12)       // 8e6 B / 2 ms
	assert.InDelta(t, 4.0*2*2/3, row.BusBWGBs, 1e-12) // 2(n-1)/n with n = 3
	assert.Equal(t, ModeNCCLTests, res.Mode)
	assert.Error(t, AllReduce{Ranks: 2, Device: "cpu", Iters: 1, Mode: "fast"}.Validate())
}

// TestCombineRanksEvenIterations: with an even number of iterations the median
// is the mean of the middle two.
func TestCombineRanksEvenIterations(t *testing.T) {
	var ranks []rankAnswer
	require.NoError(t, json.Unmarshal([]byte(`[{"results":[{"bytes":4,"count":1,"ms":[4,1,3,2]}]}]`), &ranks))
	res, err := combineRanks(ranks, AllReduce{Iters: 4})
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
	assert.Equal(t, 2.5, res.Rows[0].MS)
}

// The mean transfer time (what a mean step pays; predict --fit reads it)
// beside the median: a slow iteration moves the one, not the other.
func TestCombineRanksMean(t *testing.T) {
	var ranks []rankAnswer
	require.NoError(t, json.Unmarshal([]byte(`[
	 {"backend":"gloo","world_size":2,"rank":0,"results":[{"bytes":4096,"count":1024,"ms":[1.0,1.0,4.0]}]},
	 {"rank":1,"results":[{"bytes":4096,"count":1024,"ms":[2.0,1.0,7.0]}]}]`), &ranks))
	res, err := combineRanks(ranks, AllReduce{Iters: 3})
	require.NoError(t, err)
	assert.Equal(t, 1.0, res.Rows[0].MS)
	assert.Equal(t, 2.0, res.Rows[0].MeanMS) // least over ranks 1, 1, 4
}

// The compute a collective costs, from two ranks' loops: rank 0's
// collectives (2 of 10 ms) fit inside its loop, so a pair's steal is the
// loop's growth over the 2 (5, 6, 4 ms: median 5); rank 1's (2 of 150 ms)
// outlast its 200 ms loop, which they overlap throughout: f = 100/200, a
// collective costs 75 ms. The row: the mean over ranks.
func TestCombineCompute(t *testing.T) {
	r0 := &rankCompute{Collectives: 2, AloneMS: []float64{100, 100, 100}, BesideMS: []float64{110, 112, 108}, CommMS: []float64{20, 20, 20}}
	r1 := &rankCompute{Collectives: 2, AloneMS: []float64{100}, BesideMS: []float64{200}, CommMS: []float64{300}}
	row, err := combineCompute([]*rankCompute{r0, r1}, 1024)
	require.NoError(t, err)
	assert.InDelta(t, (5+75)/2.0, row.StealMS, 1e-12)
	assert.InDelta(t, (10+150)/2.0, row.CommMS, 1e-12)
	assert.InDelta(t, 0.5, row.Fraction, 1e-12)
	assert.Equal(t, 2, row.Collectives)
	assert.Equal(t, 100.0, row.AloneMS)

	_, err = combineCompute([]*rankCompute{r0, nil}, 1024)
	assert.ErrorContains(t, err, "rank 1: no compute loops")
	r1.Collectives = 3
	_, err = combineCompute([]*rankCompute{r0, r1}, 1024)
	assert.ErrorContains(t, err, "queued 3 collectives")
}
