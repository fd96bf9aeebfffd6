package binding

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

// TestBucketReadyTimes: a world of one with the reducer (dist.backend set)
// records what the multi-GPU prediction reads (docs/predict.md): each bucket's
// ready time since backward began, in backward's order and within it, and the
// reducer's tail; with overlap off there are no ready times (-1).
func TestBucketReadyTimes(t *testing.T) {
	lib := glooLibrary(t)
	for _, overlap := range []bool{true, false} {
		cfg := tinyGPT("fp32")
		cfg.Dist = engine.DistConfig{WorldSize: 1, Backend: "gloo", StoreAddr: "127.0.0.1", StorePort: freePort(t), TimeoutMS: 60000}
		cfg.DDP = engine.DDPConfig{BucketMB: 0.05, FirstBucketMB: 0.01, Overlap: overlap, Compression: "none"}
		e, err := lib.Create(cfg)
		require.NoError(t, err)
		steps, err := e.Steps(3)
		require.NoError(t, err)
		require.NoError(t, e.Close())
		for _, m := range steps {
			require.Greater(t, len(m.Buckets), 2, "several buckets at 0.05 MiB")
			assert.Positive(t, m.TailMS, "the reducer's finalize")
			prev := -1.0
			for i, b := range m.Buckets {
				require.NotNil(t, b.ReadyMS, "bucket %d", i)
				r := *b.ReadyMS
				if !overlap {
					assert.Equal(t, -1.0, r, "overlap off: no hooks, no ready time")
					continue
				}
				assert.GreaterOrEqual(t, r, prev, "bucket %d ready before bucket %d", i, i-1)
				assert.LessOrEqual(t, r, m.BackwardMS+0.5, "bucket %d ready after backward ended", i)
				assert.Positive(t, b.Bytes)
				prev = r
			}
		}
	}
}
