package binding

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUTPZeroDiagnose is a diagnostic, run with the GPU tests
// (CASESTUDY_GPU_TESTS=1; on CPU ranks only with CASESTUDY_TPZERO_DIAGNOSE=1): why ZeRO-2 under tp 2 x dp 2 in fp16 ends
// 2.35e-5 (relative) from DDP's parameter sum on the H100
// (TestGPUTPStagedZero/gpt_fp16, bound 1e-5) while fp32 passes and ZeRO-1 is
// bit-identical. With two data ranks every sum of gradients is the same in
// any order (a + b = b + a), the division by 2 is exact, and ZeRO-2's
// reduce-scatter carries the same fp32 gradients as DDP's all-reduce; what
// differs is the norm: ZeRO-2 sums its squares from its pieces (_foreach_norm
// of each piece in fp32, the data group's float64 sum, then the tensor
// group's), DDP from whole tensors, so the clip coefficient can differ in
// its last bit. The suspicion: that bit is the only seed, Adam turns it into
// last-bit differences of the parameters, and fp16 amplifies those: a weight
// whose fp16 cast rounds the other way (an fp16 ulp, 2^-11 relative) changes
// the next forward and backward, and a gradient whose true value is near 0
// can change sign, moving that parameter by up to 2 lr at Adam's early steps.
//
// Per variant (on the GPU: CUDA ranks sharing it through the host-staged
// groups, the test's layout and config, in fp16; with
// CASESTUDY_TPZERO_DIAGNOSE=1 also fp32 (clipped only) and CPU ranks in fp16
// where libtorch runs it, which says whether the difference needs CUDA's
// kernels; on a machine without a GPU, CPU ranks in fp32) it runs DDP
// (zero.stage 0) and ZeRO-2, twice: clipped (the engine's max norm 1; every
// step of this model clips: norms 1.07-1.22) and unclipped
// (CASESTUDY_MAX_GRAD_NORM=1e30: the coefficient is the loss scale's inverse
// alone, so the norm's rounding cannot reach the parameters). Each rank
// writes its gathered parameters (CASESTUDY_PARAM_DUMP); the test prints,
// for rank 0, the parameters that differ (elements, largest |difference|, in
// units of lr, and the summed difference), the grad norms' difference in
// float32 ulps per step, the losses, and the parameter sums' relative error.
// What the outcomes mean:
//   - unclipped bit-identical (hash equal) and clipped not: the norm's
//     rounding is the only difference between ZeRO-2 and DDP, legitimate;
//     the fp16 bound of TestGPUTPStagedZero then comes from the clipped fp16
//     measurement here (its parameter-sum error), with a margin stated;
//   - unclipped differs too: something besides the norm differs (the
//     gradients ZeRO-2 reduces, their dtype or scaling); the first step whose
//     grad norm differs unclipped, and the parameters listed, say where;
//   - the differing elements' largest |difference| near lr or 2 lr (not far
//     below): sign flips of near-zero gradients, Adam's lr·sign(g) at work.
//
// Asserted: every run finishes, every rank's dump reads back with the
// model's shapes, data ranks agree, and the runs are finite.
func TestGPUTPZeroDiagnose(t *testing.T) {
	asked := os.Getenv("CASESTUDY_TPZERO_DIAGNOSE") == "1"
	if os.Getenv("CASESTUDY_GPU_TESTS") != "1" && !asked {
		t.Skip("diagnostic: runs with CASESTUDY_GPU_TESTS=1 (CUDA fp16), or on CPU ranks with CASESTUDY_TPZERO_DIAGNOSE=1")
	}
	const steps, world = 3, 4
	type variant struct {
		name     string
		cfg      engine.Config // tp 2 x dp 2, sequence parallel, at its precision
		launch   func(engine.Config) []rankResult
		clipOnly bool // only the clipped pair (device time)
	}
	var lib *Library
	cpu := func(precision string) variant {
		c := tpGPT(2, true)
		c.Precision = precision
		return variant{"cpu " + precision, c, func(c engine.Config) []rankResult { return runRanks(t, lib, c, world, steps) }, false}
	}
	var variants []variant
	if os.Getenv("CASESTUDY_GPU_TESTS") == "1" {
		lib = gpuLibrary(t)
		// fp16, clipped and unclipped: four launches of four staged ranks
		// (about 10 s); CASESTUDY_TPZERO_DIAGNOSE=1 adds fp32 (clipped).
		for _, precision := range []string{"fp32", "fp16"} {
			if precision == "fp32" && !asked {
				continue
			}
			c := tpGPUConfig(true, "gpt")
			c.Precision = precision
			variants = append(variants, variant{"cuda " + precision, c,
				func(c engine.Config) []rankResult { return stagedRanks(t, lib, c, world, steps) }, precision == "fp32"})
		}
	} else {
		lib = glooLibrary(t)
		variants = append(variants, cpu("fp32"))
	}
	// Asked for: fp16 on CPU ranks (libtorch 2.1 and newer; the GPU host's
	// torch): with the GPU's, whether the difference needs CUDA's kernels
	// (the norm's, fp16 GEMMs).
	if asked && cpuRunsFP16(t, lib) {
		variants = append(variants, cpu("fp16"))
	}
	var report strings.Builder
	for _, v := range variants {
		for _, clip := range []struct{ name, maxNorm string }{{"clipped", ""}, {"unclipped", "1e30"}} {
			if v.clipOnly && clip.maxNorm != "" {
				continue
			}
			name := v.name + " " + clip.name
			t.Run(name, func(t *testing.T) {
				t.Setenv("CASESTUDY_MAX_GRAD_NORM", clip.maxNorm)
				cfg := tpZeroCase(t, lib, v.cfg)
				run := func(stage int) (rankResult, []paramDump) {
					dir := t.TempDir()
					t.Setenv("CASESTUDY_PARAM_DUMP", dir)
					rs := v.launch(withZero(cfg, stage))
					sameParams(t, rs)
					dumps, err := readParamDump(filepath.Join(dir, "rank0.bin"))
					require.NoError(t, err, "stage %d", stage)
					for _, l := range rs[0].Losses {
						require.False(t, math.IsNaN(l) || math.IsInf(l, 0), "stage %d: loss %v", stage, l)
					}
					return rs[0], dumps
				}
				ddp, dd := run(0)
				z2, zd := run(2)
				require.Len(t, zd, len(dd), "the two runs' parameter lists")
				fmt.Fprintf(&report, "%s (lr %g):\n%s", name, cfg.LearningRate,
					describeZeroDiff(ddp, z2, dd, zd, cfg.LearningRate))
			})
		}
	}
	t.Logf("ZeRO-2 against DDP, tp 2 x dp 2 sequence parallel, rank 0:\n%s", report.String())
}

// cpuRunsFP16: whether this engine trains fp16 on CPU Gloo ranks (libtorch
// 2.1 and newer; Debian's 1.13 refuses it at create).
func cpuRunsFP16(t *testing.T, lib *Library) bool {
	t.Helper()
	if bi, err := lib.BuildInfo(); err != nil || !bi.Gloo {
		return false // no CPU ranks without Gloo
	}
	c := dpGPT()
	c.Precision = "fp16"
	e, err := lib.Create(c)
	if err != nil {
		require.Contains(t, err.Error(), "precision fp16 on CPU needs libtorch", "fp16 on CPU: an unexpected error")
		return false
	}
	require.NoError(t, e.Close())
	return true
}

// paramDump is one tensor of a CASESTUDY_PARAM_DUMP file (checksum.h
// write_param_dump).
type paramDump struct {
	Shape []int64
	Data  []float32
}

func readParamDump(path string) ([]paramDump, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	magic := make([]byte, 6)
	if _, err := io.ReadFull(f, magic); err != nil || string(magic) != "CSPD1\n" {
		return nil, fmt.Errorf("%s: not a parameter dump (%v)", path, err)
	}
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if n > 1<<20 {
		return nil, fmt.Errorf("%s: %d tensors", path, n)
	}
	out := make([]paramDump, n)
	for i := range out {
		var dims uint64
		if err := binary.Read(f, binary.LittleEndian, &dims); err != nil || dims > 8 {
			return nil, fmt.Errorf("%s: tensor %d: %d dimensions (%v)", path, i, dims, err)
		}
		out[i].Shape = make([]int64, dims)
		if err := binary.Read(f, binary.LittleEndian, out[i].Shape); err != nil {
			return nil, fmt.Errorf("%s: tensor %d: %w", path, i, err)
		}
		numel := int64(1)
		for _, d := range out[i].Shape {
			numel *= d
		}
		if numel < 0 || numel > 1<<31 {
			return nil, fmt.Errorf("%s: tensor %d of %d elements", path, i, numel)
		}
		out[i].Data = make([]float32, numel)
		if err := binary.Read(f, binary.LittleEndian, out[i].Data); err != nil {
			return nil, fmt.Errorf("%s: tensor %d: %w", path, i, err)
		}
	}
	if _, err := f.Read(make([]byte, 1)); err != io.EOF {
		return nil, fmt.Errorf("%s: bytes after the last tensor", path)
	}
	return out, nil
}

// describeZeroDiff: the lines TestGPUTPZeroDiagnose prints for one pair of runs.
func describeZeroDiff(ddp, z2 rankResult, dd, zd []paramDump, lr float64) string {
	var b strings.Builder
	ulps := func(x, y float64) int64 {
		return int64(math.Float32bits(float32(y))) - int64(math.Float32bits(float32(x)))
	}
	rel := math.Abs(z2.Checksum.Sum-ddp.Checksum.Sum) / math.Abs(ddp.Checksum.Sum)
	fmt.Fprintf(&b, "  parameter sum DDP %.9g, ZeRO-2 %.9g: relative %.3g; bit-identical %v\n",
		ddp.Checksum.Sum, z2.Checksum.Sum, rel, ddp.Checksum.Hash == z2.Checksum.Hash)
	for i := range ddp.Metrics {
		fmt.Fprintf(&b, "  step %d: loss %.9g / %.9g, grad norm %.9g / %.9g (%+d ulps)\n", i,
			ddp.Losses[i], z2.Losses[i], ddp.Metrics[i].GradNorm, z2.Metrics[i].GradNorm,
			ulps(ddp.Metrics[i].GradNorm, z2.Metrics[i].GradNorm))
	}
	total, near := 0, 0
	sum := 0.0
	for i := range dd {
		if len(dd[i].Data) != len(zd[i].Data) {
			fmt.Fprintf(&b, "  parameter %d: shapes %v and %v\n", i, dd[i].Shape, zd[i].Shape)
			continue
		}
		n, maxAbs, s := 0, 0.0, 0.0
		for j, x := range dd[i].Data {
			d := float64(zd[i].Data[j]) - float64(x)
			if d == 0 {
				continue
			}
			n++
			s += d
			maxAbs = math.Max(maxAbs, math.Abs(d))
			if math.Abs(d) > 0.5*lr {
				near++
			}
		}
		total += n
		sum += s
		if n > 0 {
			fmt.Fprintf(&b, "  parameter %d %v: %d of %d elements differ, largest |difference| %.3g (%.3g lr), summed %+.3g\n",
				i, dd[i].Shape, n, len(dd[i].Data), maxAbs, maxAbs/lr, s)
		}
	}
	fmt.Fprintf(&b, "  in all %d elements differ, %d of them by more than lr/2; summed difference %+.3g\n", total, near, sum)
	return b.String()
}

// TestParamDumpRoundTrip: the engine's CASESTUDY_PARAM_DUMP file reads back
// as the parameters it checksums (sum and count) on CPU, one rank.
func TestParamDumpRoundTrip(t *testing.T) {
	lib := realLibrary(t)
	dir := t.TempDir()
	t.Setenv("CASESTUDY_PARAM_DUMP", dir)
	e, err := lib.Create(dpGPT())
	require.NoError(t, err)
	defer e.Close()
	_, err = e.Step()
	require.NoError(t, err)
	c, err := e.Checksum()
	require.NoError(t, err)
	dumps, err := readParamDump(filepath.Join(dir, "rank0.bin"))
	require.NoError(t, err)
	d, err := lib.Describe(dpGPT())
	require.NoError(t, err)
	var numel int64
	sum := 0.0
	for _, p := range dumps {
		numel += int64(len(p.Data))
		for _, x := range p.Data {
			sum += float64(x)
		}
	}
	assert.Equal(t, d.Params, numel, "the dump holds every parameter")
	assert.InEpsilon(t, c.Sum, sum, 1e-9, "the dump's values are the checksummed ones")
}
