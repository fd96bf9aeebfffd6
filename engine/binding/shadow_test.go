package binding

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

// TestShadowGlooCPU: CASESTUDY_INTERFERE=gloo:N, the stretch calibration
// (docs/predict.md, shadow_gloo.cpp): a world of one whose reducer sends its
// buckets every other step to a Gloo group of N (helper threads giving
// zeros). The loaded steps report their buckets' traffic, the clean ones
// none, every step the group; the training is the world of one's, bit for
// bit (x + 0 + 0 = x); a malformed value or a trainer without the DDP reducer
// of a world of one (more ranks, tensor parallelism, ZeRO, no dist.backend)
// is refused at create with a config error. No timing is asserted.
func TestShadowGlooCPU(t *testing.T) {
	lib := glooLibrary(t)
	cfg := func() engine.Config {
		c := tinyGPT("fp32")
		c.Dist = engine.DistConfig{WorldSize: 1, Backend: "gloo", StoreAddr: "127.0.0.1", StorePort: freePort(t), TimeoutMS: 60000}
		c.DDP = engine.DDPConfig{BucketMB: 0.05, FirstBucketMB: 0.01, Overlap: true, Compression: "none"}
		return c
	}
	run := func(env string) []engine.StepMetrics {
		t.Setenv("CASESTUDY_INTERFERE", env)
		e, err := lib.Create(cfg())
		require.NoError(t, err)
		steps, err := e.Steps(4)
		require.NoError(t, err)
		require.NoError(t, e.Close())
		return steps
	}
	plain := run("")
	shadow := run("gloo:3")
	for i, m := range shadow {
		t.Logf("step %d: backward %.2f ms, shadow %.3f GB/s, ranks %d", m.Step, m.BackwardMS, m.InterfereGBps, m.InterfereRanks)
		assert.Equal(t, 3, m.InterfereRanks, "step %d names the group", i)
		if i%2 == 1 {
			assert.Positive(t, m.InterfereGBps, "step %d: loaded (every other step, from the second)", i)
		} else {
			assert.Zero(t, m.InterfereGBps, "step %d: clean", i)
		}
		assert.Equal(t, plain[i].Loss, m.Loss, "step %d: the group adds zeros", i)
		assert.Equal(t, plain[i].GradNorm, m.GradNorm, "step %d", i)
		assert.Equal(t, len(plain[i].Buckets), len(m.Buckets), "step %d: the same buckets", i)
	}
	for _, bad := range []string{"gloo:", "gloo:1", "gloo:x", "gloo:2x"} {
		t.Setenv("CASESTUDY_INTERFERE", bad)
		_, err := lib.Create(cfg())
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "CASESTUDY_INTERFERE="+bad, bad)
	}
	// Refused at create, before any step, naming the field: a rank of a real
	// group (its buckets would leave its peers; tensor parallelism's too), a
	// world of one without dist.backend (no reducer) and ZeRO (it replaces the
	// reducer). Until issue 39's hardening all but the first reached their
	// first step.
	t.Setenv("CASESTUDY_INTERFERE", "gloo:2")
	refusedOnRanks := func(c engine.Config, want string) {
		t.Helper()
		port := freePort(t)
		errs := make(chan error, 2)
		for r := 0; r < 2; r++ {
			go func(r int) {
				c := c
				c.Dist = engine.DistConfig{Rank: r, WorldSize: 2, Backend: "gloo", StoreAddr: "127.0.0.1", StorePort: port, TimeoutMS: 60000}
				e, err := lib.Create(c)
				if err == nil {
					e.Close()
				}
				errs <- err
			}(r)
		}
		for r := 0; r < 2; r++ {
			err := <-errs
			require.Error(t, err, want)
			assert.ErrorIs(t, err, engine.ErrConfig, "exit status 2")
			assert.Contains(t, err.Error(), want)
		}
	}
	ddp := tinyGPT("fp32")
	ddp.DDP = engine.DDPConfig{BucketMB: 1, FirstBucketMB: 1, Overlap: true, Compression: "none"}
	refusedOnRanks(ddp, "CASESTUDY_INTERFERE=gloo:2 (the stretch calibration) needs the DDP reducer of a world of one "+
		"(dist.world_size 1, dist.backend gloo, zero.stage 0), but dist.world_size is 2")
	refusedOnRanks(withZero(ddp, 1), "dist.world_size is 2")
	refusedOnRanks(tpGPT(2, false), "dist.world_size is 2")
	for _, tc := range []struct {
		desc string
		cfg  engine.Config
		want string
	}{
		{"no dist.backend", tinyGPT("fp32"), "dist.backend is not set"},
		{"ZeRO-1 on a world of one", withZero(cfg(), 1), "zero.stage is 1"},
		{"ZeRO-2 on a world of one", withZero(cfg(), 2), "zero.stage is 2"},
	} {
		e, err := lib.Create(tc.cfg)
		if err == nil {
			e.Close()
		}
		require.Error(t, err, tc.desc)
		assert.ErrorIs(t, err, engine.ErrConfig, tc.desc)
		assert.Contains(t, err.Error(), tc.want, tc.desc)
	}
}
