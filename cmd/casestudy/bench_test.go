package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/bench"
	"github.com/casestudy/casestudy/internal/exitcode"
)

func TestBenchAllReduceFlags(t *testing.T) {
	tests := []struct{ description, flag string }{
		{"bad size", "--sizes=3Q"},
		{"no ranks", "--ranks=0"},
		{"bad device", "--device=tpu"},
		{"no iterations", "--iters=0"},
		{"bad mode", "--mode=fast"},
		{"negative beside", "--beside=-1"},
		{"staged beside busy threads", "--staged --beside=1"},
		{"a stray argument", "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := execute(context.Background(), append([]string{"bench", "allreduce"}, strings.Fields(tt.flag)...), &out, &errb)
			assert.Equal(t, exitcode.Input, code, errb.String())
		})
	}
}

// TestBenchAllReduceCPU runs the benchmark for real: 2 Gloo ranks as children
// of this test binary (TestMain's asMainEnv makes them behave as casestudy).
func TestBenchAllReduceCPU(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(asMainEnv, "1")
	for _, mode := range []string{bench.ModeSync, bench.ModeNCCLTests} {
		t.Run(mode, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := execute(context.Background(), []string{"bench", "allreduce", "--engine-lib", lib,
				"--ranks", "2", "--sizes", "64K,1M", "--iters", "5", "--warmup", "1", "--mode", mode, "--json"}, &out, &errb)
			require.Equal(t, 0, code, errb.String())
			var res bench.Result
			require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
			assert.Equal(t, "gloo", res.Backend)
			assert.Equal(t, 2, res.Ranks)
			assert.Equal(t, mode, res.Mode)
			require.Len(t, res.Rows, 2)
			for i, want := range []int64{64 << 10, 1 << 20} {
				row := res.Rows[i]
				assert.Equal(t, want, row.Bytes)
				assert.Equal(t, want/4, row.Count)
				assert.Positive(t, row.MS)
				assert.LessOrEqual(t, row.MinMS, row.MS)
				assert.GreaterOrEqual(t, row.MaxMS, row.MS)
				assert.GreaterOrEqual(t, row.SlowestMS, row.MS, "the least over ranks is at most the slowest")
				assert.GreaterOrEqual(t, row.SkewMS, 0.0)
				assert.InDelta(t, float64(want)/(row.MS*1e6), row.AlgBWGBs, 1e-9)
				assert.InDelta(t, row.AlgBWGBs, row.BusBWGBs, 1e-9) // 2 ranks: 2(n-1)/n = 1
			}
		})
	}
	// Beside one busy thread per rank: the result says so (predict --fit-beside reads it).
	var out, errb bytes.Buffer
	code := execute(context.Background(), []string{"bench", "allreduce", "--engine-lib", lib,
		"--ranks", "2", "--sizes", "64K,1M", "--iters", "3", "--warmup", "1", "--beside", "1", "--json"}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	var res bench.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, 1, res.Beside)
	require.Len(t, res.Rows, 2)
	assert.Positive(t, res.Rows[1].MS)

	// The rehearsal's host-staged collective (on CPU tensors the same code
	// with host copies): the result names its backend, which a fit carries.
	out.Reset()
	code = execute(context.Background(), []string{"bench", "allreduce", "--engine-lib", lib,
		"--ranks", "2", "--sizes", "64K,1M", "--iters", "3", "--warmup", "1", "--staged", "--json"}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	res = bench.Result{}
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, "gloo-staged", res.Backend)
	require.Len(t, res.Rows, 2)
	assert.Positive(t, res.Rows[1].MS)

	// The compute loops alone and beside the collectives (predict --fit-stretch reads them).
	out.Reset()
	code = execute(context.Background(), []string{"bench", "allreduce", "--engine-lib", lib,
		"--ranks", "2", "--sizes", "64K,1M", "--iters", "3", "--warmup", "1", "--interference", "2", "--json"}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	res = bench.Result{}
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, 2, res.Interference)
	require.Len(t, res.Rows, 2)
	for _, row := range res.Rows {
		c := row.Compute
		require.NotNil(t, c, "row %d bytes", row.Bytes)
		assert.Equal(t, 2, c.Pairs)
		assert.GreaterOrEqual(t, c.Collectives, 1)
		assert.Positive(t, c.AloneMS)
		assert.Positive(t, c.BesideMS)
		assert.Positive(t, c.CommMS)
		assert.InDelta(t, c.StealMS/c.CommMS, c.Fraction, 1e-12)
	}
}
