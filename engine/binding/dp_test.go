package binding

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Data parallel tests: real rank processes on the CPU, talking Gloo. The test
// binary re-executes itself in child mode (TestMain, dpChildEnv): each child
// creates an engine from the config in dpConfigEnv, runs the steps, and prints
// its losses, step metrics and parameter checksum as one JSON line.

const (
	dpChildEnv  = "CASESTUDY_DP_CHILD"  // "1": this process is a rank
	dpConfigEnv = "CASESTUDY_DP_CONFIG" // the rank's engine config JSON
	dpStepsEnv  = "CASESTUDY_DP_STEPS"
	dpLibEnv    = "CASESTUDY_DP_LIB" // the library the parent loaded
	dpResult    = "DPRESULT "        // prefix of the child's answer line
)

// dpChecksumsEnv "1": the child also checksums its parameters before the
// first step and after every step (rankResult.Sums; a collective under tp).
const dpChecksumsEnv = "CASESTUDY_DP_CHECKSUMS"

func TestMain(m *testing.M) {
	if os.Getenv(dpChildEnv) == "1" {
		os.Exit(dpChild())
	}
	os.Exit(m.Run())
}

// rankResult is what one rank process reports.
type rankResult struct {
	Losses   []float64            `json:"losses"`
	Metrics  []engine.StepMetrics `json:"metrics"`
	Checksum engine.Checksum      `json:"checksum"`
	Info     engine.Info          `json:"info"`
	Log      string               `json:"-"` // the rank's stdout and stderr (parent side)
	// dpChecksumsEnv: [0] before step 0, [i+1] after step i.
	Sums []engine.Checksum `json:"sums,omitempty"`
}

func dpChild() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "dp child:", err)
		return 1
	}
	var cfg engine.Config
	if err := json.Unmarshal([]byte(os.Getenv(dpConfigEnv)), &cfg); err != nil {
		return fail(err)
	}
	var steps int
	if _, err := fmt.Sscan(os.Getenv(dpStepsEnv), &steps); err != nil {
		return fail(err)
	}
	lib, err := Load(os.Getenv(dpLibEnv))
	if err != nil {
		return fail(err)
	}
	if err := ncclRendezvous(lib, &cfg); err != nil { // gpu_multi_test.go
		return fail(err)
	}
	stopProgress := printProgress(lib) // comm_test.go
	defer stopProgress()
	e, err := lib.Create(cfg)
	if err != nil {
		return fail(err)
	}
	var res rankResult
	if res.Info, err = e.Info(); err != nil {
		return fail(err)
	}
	each := os.Getenv(dpChecksumsEnv) == "1"
	checksum := func() error {
		if !each {
			return nil
		}
		c, err := e.Checksum()
		res.Sums = append(res.Sums, c)
		return err
	}
	if err := checksum(); err != nil {
		return fail(err)
	}
	for i := 0; i < steps; i++ {
		m, err := e.Step()
		if err != nil {
			stopProgress()
			return fail(fmt.Errorf("step %d: %w", i, err))
		}
		if err := lowerCommTimeout(lib, i); err != nil { // comm_test.go
			return fail(err)
		}
		res.Losses = append(res.Losses, m.Loss)
		res.Metrics = append(res.Metrics, m)
		if err := checksum(); err != nil {
			return fail(fmt.Errorf("checksum after step %d: %w", i, err))
		}
	}
	if res.Checksum, err = e.Checksum(); err != nil {
		return fail(err)
	}
	if err := e.Close(); err != nil {
		return fail(err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return fail(err)
	}
	fmt.Println(dpResult + string(out))
	return 0
}

// glooLibrary is realLibrary for the CPU data parallel tests: the engine must
// have been built with Gloo (under CI=true a build without it fails the test).
func glooLibrary(t *testing.T) *Library {
	t.Helper()
	lib := realLibrary(t)
	bi, err := lib.BuildInfo()
	require.NoError(t, err)
	if !bi.Gloo {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the engine was built without Gloo: %+v", bi)
		}
		t.Skipf("the engine was built without Gloo (torch %s): no CPU data parallel", bi.Torch)
	}
	return lib
}

// freePort asks the kernel for a free TCP port on the loopback.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runRanks trains cfg on world Gloo ranks for steps steps, one process each.
func runRanks(t *testing.T, lib *Library, cfg engine.Config, world, steps int) []rankResult {
	t.Helper()
	results, errs := startRanks(t, lib, cfg, world, steps, rankOpts{})
	for _, err := range errs {
		require.NoError(t, err)
	}
	return results
}

// rankOpts generalises startRanks beyond CPU Gloo ranks (gpu_multi_test.go).
type rankOpts struct {
	nccl     bool          // backend nccl: rank r alone on GPU r (visibleDevice), device_index 0; one failed rank stops the others
	deadline time.Duration // every rank is killed after it; default 90 s
	env      []string      // extra environment of every rank
	staged   bool          // backend gloo-staged (staged_test.go): CUDA ranks share the device
}

// startRanks runs world rank processes and returns each one's result or
// error; a rank still running at the deadline is killed and its error says so.
func startRanks(t *testing.T, lib *Library, cfg engine.Config, world, steps int, o rankOpts) ([]rankResult, []error) {
	t.Helper()
	// freePort's port is free when asked and taken by rank 0's store later:
	// another test's process (go test runs packages side by side) may take it
	// in between, and rank 0 then fails to bind (seen in a fresh clone's make
	// test, 2026-12-07). That is the harness's race, not the engine's: launch
	// again on another port, at most twice more.
	for attempt := 1; ; attempt++ {
		results, errs := startRanksOnce(t, lib, cfg, world, steps, o)
		if o.nccl || attempt == 3 || errs[0] == nil || !strings.Contains(errs[0].Error(), storeBindTaken) {
			return results, errs
		}
		t.Logf("attempt %d: rank 0's store port was taken before it bound (%s): again on another port", attempt, storeBindTaken)
	}
}

// storeBindTaken is what rank 0 reports when its store's port is taken.
const storeBindTaken = "Address already in use"

func startRanksOnce(t *testing.T, lib *Library, cfg engine.Config, world, steps int, o rankOpts) ([]rankResult, []error) {
	t.Helper()
	if o.deadline == 0 {
		o.deadline = 90 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.deadline)
	defer cancel()
	timeoutMS := 60000
	if cfg.Dist.TimeoutMS > 0 {
		timeoutMS = cfg.Dist.TimeoutMS
	}
	dist := engine.DistConfig{WorldSize: world, Backend: "gloo", StoreAddr: "127.0.0.1", TimeoutMS: timeoutMS}
	if o.staged {
		dist.Backend = engine.BackendStaged
	}
	env := append(os.Environ(), dpChildEnv+"=1", fmt.Sprintf("%s=%d", dpStepsEnv, steps),
		dpLibEnv+"="+lib.Path(), "OMP_NUM_THREADS=1")
	if o.nccl {
		dist = engine.DistConfig{WorldSize: world, Backend: "nccl", TimeoutMS: timeoutMS}
		env = append(env, ncclIDFileEnv+"="+filepath.Join(t.TempDir(), "nccl-id"))
	} else {
		dist.StorePort = freePort(t)
	}
	env = append(env, o.env...)
	results := make([]rankResult, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		c := cfg
		c.Dist = dist
		c.Dist.Rank = r
		rankEnv := env[:len(env):len(env)] // appends copy: no rank sees another's
		if o.nccl {
			c.DeviceIndex = 0
			rankEnv = append(rankEnv, "CUDA_VISIBLE_DEVICES="+visibleDevice(r))
		} else {
			c.Threads = 1 // 2 cores for up to 4 ranks
		}
		raw, err := json.Marshal(c)
		require.NoError(t, err)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(rankEnv, dpConfigEnv+"="+string(raw))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				switch ctx.Err() {
				case context.DeadlineExceeded:
					err = fmt.Errorf("killed at the %v deadline (hang?): %w", o.deadline, err)
				case context.Canceled:
					err = fmt.Errorf("killed after another rank failed: %w", err)
				}
				errs[r] = fmt.Errorf("rank %d: %w\n%s", r, err, tail(stderr.String()))
				if o.nccl || (r == 0 && strings.Contains(stderr.String(), storeBindTaken)) {
					cancel() // the peers would wait for this rank (or its store) until their timeout
				}
				return
			}
			errs[r] = parseRank(stdout.String(), &results[r])
			results[r].Log = stdout.String() + stderr.String()
		}(r)
	}
	wg.Wait()
	return results, errs
}

func parseRank(out string, res *rankResult) error {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), dpResult); ok {
			return json.Unmarshal([]byte(line), res)
		}
	}
	return fmt.Errorf("no %q line in the rank's output:\n%s", dpResult, tail(out))
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// sameParams asserts that every rank holds bit-identical parameters.
func sameParams(t *testing.T, rs []rankResult) {
	t.Helper()
	for r := 1; r < len(rs); r++ {
		assert.Equal(t, rs[0].Checksum, rs[r].Checksum, "rank %d's parameters differ from rank 0's", r)
	}
}

// globalLosses is the loss of the global batch per step: the mean over ranks
// of each rank's micro-batch loss (equal micro-batch sizes).
func globalLosses(rs []rankResult) []float64 {
	out := make([]float64, len(rs[0].Losses))
	for _, r := range rs {
		for i, l := range r.Losses {
			out[i] += l / float64(len(rs))
		}
	}
	return out
}

func dpGPT() engine.Config {
	return engine.Config{
		Family: "gpt", Preset: "tiny", MicroBatch: 2, Device: "cpu", Threads: 1,
		Precision: "fp32", GradAccum: 1, Seed: 5,
		DDP: engine.DDPConfig{BucketMB: 25, FirstBucketMB: 1, Overlap: true, Compression: "none"},
	}
}

// TestDPMatchesSingleRank: R ranks with micro-batch b follow one rank with
// batch R·b (rank r trains on rows [r·b, (r+1)·b) of the single rank's batch).
// The gradients then differ only by float32 summation order (the mean over
// R·b rows vs. the mean of R means), and clipping is the single rank's
// (clip_grads): the losses agree within 1.3e-7 relative over 3 steps on the
// machine that measured the tolerances (tolFirstLoss, tolLoss and tolParamSum
// in pipeline_test.go, from gpt tiny's noise floor at micro-batch 2).
func TestDPMatchesSingleRank(t *testing.T) {
	lib := glooLibrary(t)
	tests := []struct {
		description string
		world       int
		gradAccum   int
		overlap     bool
	}{
		{"a world of one (dist.backend set, world_size 1)", 1, 1, true},
		{"2 ranks", 2, 1, true},
		{"2 ranks, grad_accum 2, no overlap", 2, 2, false},
		{"4 ranks", 4, 1, true},
	}
	const steps = 3
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			cfg := dpGPT()
			cfg.GradAccum = tt.gradAccum
			cfg.DDP.Overlap = tt.overlap
			rs := runRanks(t, lib, cfg, tt.world, steps)
			sameParams(t, rs)

			single := cfg
			single.MicroBatch = cfg.MicroBatch * tt.world
			single.Dist = engine.DistConfig{WorldSize: 1}
			want, e := train(t, lib, single, steps)
			wantSum, err := e.Checksum()
			require.NoError(t, err)

			got := globalLosses(rs)
			t.Logf("losses: %d ranks %v, 1 rank %v", tt.world, got, want)
			assertFollows(t, want, got, fmt.Sprintf("%d ranks", tt.world))
			assert.InEpsilon(t, wantSum.Sum, rs[0].Checksum.Sum, tolParamSum, "parameter sum")
			for i, m := range rs[0].Metrics {
				// grad_accum > 1: only the last micro-batch communicates.
				assert.Positive(t, m.Collectives, "step %d: no all-reduce", i)
				assert.Len(t, m.Buckets, m.Collectives, "step %d", i)
				assert.Equal(t, cfg.MicroBatch*tt.gradAccum, m.Samples, "step %d", i)
			}
		})
	}
}

// ddpBuckets is DDP's assignment over gradient sizes in ready order: a bucket
// closes once it reaches its cap, the first bucket's cap is first.
func ddpBuckets(sizes []int64, first, cap int64) []int64 {
	var out []int64
	var cur int64
	limit := first
	for _, s := range sizes {
		cur += s
		if cur >= limit {
			out = append(out, cur)
			cur, limit = 0, cap
		}
	}
	if cur > 0 {
		out = append(out, cur)
	}
	return out
}

func bucketBytes(m engine.StepMetrics) []int64 {
	var out []int64
	for _, b := range m.Buckets {
		out = append(out, b.Bytes)
	}
	return out
}

// TestDPBuckets: the number and sizes of the collectives follow DDP's bucket
// assignment computed from the parameter sizes, and neither the bucketing nor
// overlap changes the result: with 2 ranks a sum is a+b whatever the chunking,
// so every variant must end bit-identical.
func TestDPBuckets(t *testing.T) {
	lib := glooLibrary(t)
	desc, err := lib.Describe(dpGPT())
	require.NoError(t, err)
	const mib = 1 << 20
	// A cap of 1 byte puts every parameter in its own bucket: the bucket sizes
	// are then the parameter sizes in reverse registration order.
	cfg := dpGPT()
	cfg.DDP.BucketMB, cfg.DDP.FirstBucketMB = 1.0/mib, 1.0/mib
	perTensor := runRanks(t, lib, cfg, 2, 1)
	sizes := bucketBytes(perTensor[0].Metrics[0])
	var total int64
	for _, s := range sizes {
		total += s
	}
	require.Equal(t, 4*desc.Params, total, "fp32 gradients of all %d parameters", desc.Params)
	require.Greater(t, len(sizes), 4)
	sameParams(t, perTensor)

	tests := []struct {
		description string
		firstMB     float64
		capMB       float64
		overlap     bool
	}{
		{"defaults 1 MB / 25 MB", 1, 25, true},
		{"first a tenth, then a quarter of the model", float64(total) / 10 / mib, float64(total) / 4 / mib, true},
		{"same without overlap", float64(total) / 10 / mib, float64(total) / 4 / mib, false},
		{"one bucket", 1024, 1024, false},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			cfg := dpGPT()
			cfg.DDP.FirstBucketMB, cfg.DDP.BucketMB, cfg.DDP.Overlap = tt.firstMB, tt.capMB, tt.overlap
			rs := runRanks(t, lib, cfg, 2, 1)
			sameParams(t, rs)
			m := rs[0].Metrics[0]
			want := ddpBuckets(sizes, int64(tt.firstMB*mib), int64(tt.capMB*mib))
			assert.Equal(t, want, bucketBytes(m))
			assert.Equal(t, len(want), m.Collectives)
			assert.Equal(t, total, m.CommBytes)
			assert.Equal(t, perTensor[0].Checksum, rs[0].Checksum, "bucketing changed the parameters")
			for _, b := range m.Buckets {
				assert.Positive(t, b.MS)
				assert.InDelta(t, b.AlgBWGBs, b.BusBWGBs, 1e-9*b.AlgBWGBs, "2 ranks: busbw = algbw·2(n-1)/n = algbw")
			}
			assert.Positive(t, m.CommMS)
			assert.GreaterOrEqual(t, m.ExposedCommMS, 0.0)
		})
	}
}

// TestDPCompressionTrains: the compressed wire formats still train and keep
// the ranks bit-identical. "Train" is measured against the uncompressed run of
// the same steps: the global loss must fall by at least half as much (fp16 and
// bf16 round the averaged gradient to 11 or 8 significant bits and land within
// a few thousandths of it; top-k at ratio 0.1 with error feedback lags a
// little; a reducer that dropped or garbled the gradient would not fall). The
// bytes on the wire: fp16 halves them, Gloo carries bf16 as fp32, top-k sends
// ceil(0.1 n) int32 indices and fp32 values per rank and bucket.
func TestDPCompressionTrains(t *testing.T) {
	lib := glooLibrary(t)
	desc, err := lib.Describe(dpGPT())
	require.NoError(t, err)
	const steps = 12
	fall := func(losses []float64) float64 { return mean(losses[:3]) - mean(losses[steps-3:]) }
	cfg := dpGPT()
	cfg.LearningRate = 3e-3 // learns visibly within a dozen steps of batch 2x2
	plain := globalLosses(runRanks(t, lib, cfg, 2, steps))
	require.Positive(t, fall(plain), "uncompressed losses: %v", plain)

	tests := []struct {
		compression string
		bytes       int64 // comm bytes of one step (2 ranks); 0: top-k, checked approximately
	}{
		{"fp16", 2 * desc.Params},
		{"bf16", 4 * desc.Params},
		{"topk", 0},
	}
	for _, tt := range tests {
		t.Run(tt.compression, func(t *testing.T) {
			c := cfg
			c.DDP.Compression = tt.compression
			c.DDP.TopKRatio = 0.1
			rs := runRanks(t, lib, c, 2, steps)
			sameParams(t, rs)
			losses := globalLosses(rs)
			t.Logf("%s: loss fell by %.4f (uncompressed %.4f)", tt.compression, fall(losses), fall(plain))
			assert.Greater(t, fall(losses), 0.5*fall(plain), "losses %v\nuncompressed %v", losses, plain)
			m := rs[0].Metrics[0]
			if tt.bytes > 0 {
				assert.Equal(t, tt.bytes, m.CommBytes)
			} else {
				// 2 ranks x (k indices + k values) x 4 bytes, k = ceil(0.1 n) per bucket.
				assert.InEpsilon(t, float64(16*desc.Params)/10, float64(m.CommBytes), 0.01)
			}
		})
	}
}

// TestDPResNet: the tiny ResNet (BatchNorm: each rank normalises over its own
// micro-batch, as DDP without SyncBatchNorm, so no single-rank equality) keeps
// its ranks bit-identical and learns on 2 and 4 ranks, also with channels_last
// weights (non-contiguous parameters broadcast and bucketed).
func TestDPResNet(t *testing.T) {
	lib := glooLibrary(t)
	tests := []struct {
		world        int
		channelsLast bool
	}{{2, false}, {4, true}}
	for _, tt := range tests {
		world := tt.world
		t.Run(fmt.Sprintf("%d ranks, channels_last %v", world, tt.channelsLast), func(t *testing.T) {
			cfg := engine.Config{
				Family: "resnet50", Preset: "tiny", MicroBatch: 8, Device: "cpu", Threads: 1,
				Precision: "fp32", GradAccum: 1, Seed: 11, ChannelsLast: tt.channelsLast,
				DDP: engine.DDPConfig{BucketMB: 25, FirstBucketMB: 1, Overlap: true, Compression: "none"},
			}
			const steps = 20
			rs := runRanks(t, lib, cfg, world, steps)
			sameParams(t, rs)
			losses := globalLosses(rs)
			first, last := mean(losses[:5]), mean(losses[steps-5:])
			t.Logf("loss first 5 mean %.4f, last 5 mean %.4f (%.1f%%)", first, last, 100*last/first)
			assert.Less(t, last, 0.9*first, "losses: %v", losses)
			assert.False(t, math.IsNaN(last))
		})
	}
}

// TestGPUNCCLOneRank runs the NCCL communicator with world size 1 through
// cs_bench_allreduce on the H200 (scripts/gpu-check.sh): init from a unique id,
// the comm stream, events, the watchdog, barrier; each size's sum is checked by
// the engine before it is timed.
func TestGPUNCCLOneRank(t *testing.T) {
	lib := gpuLibrary(t)
	id, err := lib.NCCLUniqueID()
	require.NoError(t, err)
	require.Len(t, id, 256)
	cfg, err := json.Marshal(map[string]any{
		"device": "cuda", "device_index": 0, "sizes": []int64{4 << 10, 64 << 20}, "iters": 5, "warmup": 2,
		"dist": engine.DistConfig{Rank: 0, WorldSize: 1, Backend: "nccl", NCCLID: id, TimeoutMS: 60000},
	})
	require.NoError(t, err)
	raw, err := lib.BenchAllReduce(cfg)
	require.NoError(t, err)
	var res struct {
		Backend string `json:"backend"`
		Version string `json:"version"`
		Results []struct {
			Bytes int64     `json:"bytes"`
			MS    []float64 `json:"ms"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(raw, &res), "%s", raw)
	t.Logf("%s", raw)
	assert.Equal(t, "nccl", res.Backend)
	assert.Regexp(t, `^\d+\.\d+\.\d+$`, res.Version)
	require.Len(t, res.Results, 2)
	for _, r := range res.Results {
		assert.Len(t, r.MS, 5)
		for _, ms := range r.MS {
			assert.True(t, ms >= 0 && ms < 1000, "%d bytes took %v ms", r.Bytes, ms)
		}
	}
}
