package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
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
			got, err := parseSizes(tt.in)
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
	var ranks []benchRank
	require.NoError(t, json.Unmarshal([]byte(`[
	 {"backend":"nccl","version":"2.21.5","world_size":4,"rank":0,"device":"cuda:0",
	  "results":[{"bytes":4000000,"count":1000000,"ms":[1.0,2.0,3.0]}]},
	 {"rank":1,"results":[{"bytes":4000000,"count":1000000,"ms":[1.5,1.0,1.0]}]},
	 {"rank":2,"results":[{"bytes":4000000,"count":1000000,"ms":[1.0,1.0,1.0]}]},
	 {"rank":3,"results":[{"bytes":4000000,"count":1000000,"ms":[1.0,1.0,4.0]}]}]`), &ranks))
	res, err := combineRanks(ranks, benchAllReduceOptions{iters: 3, warmup: 1})
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
	row := res.Rows[0]
	// slowest rank per iteration: 1.5, 2, 4 -> median 2 ms
	assert.Equal(t, 2.0, row.MS)
	assert.Equal(t, 1.5, row.MinMS)
	assert.Equal(t, 4.0, row.MaxMS)
	assert.InDelta(t, 2.0, row.AlgBWGBs, 1e-12)       // 4e6 B / 2 ms
	assert.InDelta(t, 2.0*2*3/4, row.BusBWGBs, 1e-12) // 2(n-1)/n with n = 4

	ranks[2].Results[0].MS = ranks[2].Results[0].MS[:2]
	_, err = combineRanks(ranks, benchAllReduceOptions{iters: 3})
	assert.Error(t, err)
}

// TestCombineRanksEvenIterations: with an even number of iterations the median
// is the mean of the middle two.
func TestCombineRanksEvenIterations(t *testing.T) {
	var ranks []benchRank
	require.NoError(t, json.Unmarshal([]byte(`[{"results":[{"bytes":4,"count":1,"ms":[4,1,3,2]}]}]`), &ranks))
	res, err := combineRanks(ranks, benchAllReduceOptions{iters: 4})
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
	assert.Equal(t, 2.5, res.Rows[0].MS)
}

func TestBenchAllReduceFlags(t *testing.T) {
	tests := []struct{ description, flag string }{
		{"bad size", "--sizes=3Q"},
		{"no ranks", "--ranks=0"},
		{"bad device", "--device=tpu"},
		{"no iterations", "--iters=0"},
		{"a stray argument", "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := execute(context.Background(), []string{"bench", "allreduce", tt.flag}, &out, &errb)
			assert.Equal(t, exitcode.Input, code, errb.String())
		})
	}
}

// TestBenchAllReduceCPU runs the benchmark for real: 2 Gloo ranks as children
// of this test binary (TestMain's asMainEnv makes them behave as casestudy).
func TestBenchAllReduceCPU(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(asMainEnv, "1")
	var out, errb bytes.Buffer
	code := execute(context.Background(), []string{"bench", "allreduce", "--engine-lib", lib,
		"--ranks", "2", "--sizes", "64K,1M", "--iters", "5", "--warmup", "1", "--json"}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	var res BenchResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, "gloo", res.Backend)
	assert.Equal(t, 2, res.Ranks)
	require.Len(t, res.Rows, 2)
	for i, want := range []int64{64 << 10, 1 << 20} {
		row := res.Rows[i]
		assert.Equal(t, want, row.Bytes)
		assert.Equal(t, want/4, row.Count)
		assert.Positive(t, row.MS)
		assert.LessOrEqual(t, row.MinMS, row.MS)
		assert.GreaterOrEqual(t, row.MaxMS, row.MS)
		assert.InDelta(t, float64(want)/(row.MS*1e6), row.AlgBWGBs, 1e-9)
		assert.InDelta(t, row.AlgBWGBs, row.BusBWGBs, 1e-9) // 2 ranks: 2(n-1)/n = 1
	}
}
