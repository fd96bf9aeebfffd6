// Package bench holds the microbenchmarks on the engine's own building blocks
// (`casestudy bench ...`): each rank is a process of the casestudy binary that
// loads the engine, and the parent combines their timings.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/stats"
)

// Library is what the benchmark needs of the loaded engine library
// (*binding.Library; the command passes binding.Load as Open, so this
// package builds without cgo).
type Library interface {
	BenchAllReduce(config []byte) (json.RawMessage, error)
	NCCLUniqueID() (string, error)
	Close() error
}

// AllReduce configures the all-reduce benchmark.
type AllReduce struct {
	Lib     string                             // the engine library
	Open    func(path string) (Library, error) // loads it
	Sizes   []int64                            // message sizes in bytes (whole fp32 values)
	Ranks   int
	Device  string // cpu (Gloo) or cuda (NCCL, rank r on GPU r)
	Iters   int
	Warmup  int
	Mode    string        // sync (default: one host wait per iteration) | nccl-tests (back to back, one wait)
	Timeout time.Duration // for the whole benchmark
	// Beside is the busy compute threads each rank runs while it times
	// (CPU ranks): the collective's cost beside the compute it overlaps in
	// a training step, where the ranks' compute threads and the
	// communicator's share the cores (docs/predict.md).
	Beside int
	// Interference is the pairs of a compute loop alone and beside the
	// collectives each rank times per size (CPU ranks, sync mode; 0: none):
	// what a collective costs the compute it overlaps (Row.Compute).
	Interference int
	// Staged: the rehearsal's host-staged backend (gloo-staged): each
	// collective copies its tensor to a pinned host buffer, runs Gloo there
	// and copies the result back; on cuda every rank on GPU 0, the ranks
	// sharing one GPU (and its PCIe link) as a one-GPU rehearsal's do. The
	// time is the staged collective's, copies included (docs/predict.md).
	Staged bool

	// One rank (RankArgs): which, and how it meets the others.
	Rank   int
	Port   int    // Gloo's TCP store on loopback
	NCCLID string // the NCCL unique id
}

// Validate checks the options a user gives.
func (o AllReduce) Validate() error {
	switch {
	case o.Ranks < 1:
		return fmt.Errorf("--ranks must be at least 1, got %d", o.Ranks)
	case o.Device != "cpu" && o.Device != "cuda":
		return fmt.Errorf("--device must be cpu or cuda, got %q", o.Device)
	case o.Iters < 1:
		return fmt.Errorf("--iters must be at least 1, got %d", o.Iters)
	case o.Warmup < 0:
		return fmt.Errorf("--warmup must not be negative, got %d", o.Warmup)
	case o.Beside < 0 || o.Beside > 0 && o.Device != "cpu":
		return fmt.Errorf("--beside %d: give 0 or more busy threads per rank, with --device cpu", o.Beside)
	case o.Interference < 0 || o.Interference > 0 && (o.Device != "cpu" || o.mode() != ModeSync || o.Beside > 0):
		return fmt.Errorf("--interference %d: give 0 or more pairs, with --device cpu, --mode sync and no --beside", o.Interference)
	case o.Staged && (o.Beside > 0 || o.Interference > 0):
		return fmt.Errorf("--staged times the staged collective alone: drop --beside and --interference")
	case o.Mode != "" && o.Mode != ModeSync && o.Mode != ModeNCCLTests:
		return fmt.Errorf("--mode must be %s or %s, got %q", ModeSync, ModeNCCLTests, o.Mode)
	}
	return nil
}

// The benchmark's timing modes.
const (
	ModeSync      = "sync"       // each iteration timed on its own, the host waits after each
	ModeNCCLTests = "nccl-tests" // iterations back to back after a barrier, one host wait (nccl-tests' timing)
)

func (o AllReduce) mode() string {
	if o.Mode == "" {
		return ModeSync
	}
	return o.Mode
}

// RankArgs are the arguments of `casestudy bench allreduce` that run rank r
// (its hidden --child flags).
func (o AllReduce) RankArgs(r int, rendezvous []string) []string {
	sizes := make([]string, len(o.Sizes))
	for i, s := range o.Sizes {
		sizes[i] = strconv.FormatInt(s, 10)
	}
	return append([]string{"bench", "allreduce", "--child", "--engine-lib", o.Lib,
		"--rank", strconv.Itoa(r), "--ranks", strconv.Itoa(o.Ranks), "--device", o.Device,
		"--sizes", strings.Join(sizes, ","), "--iters", strconv.Itoa(o.Iters), "--warmup", strconv.Itoa(o.Warmup),
		"--mode", o.mode(), "--beside", strconv.Itoa(o.Beside), "--interference", strconv.Itoa(o.Interference),
		"--staged=" + strconv.FormatBool(o.Staged)}, rendezvous...)
}

// ParseSizes reads "1M,4M,512K,100" as bytes (binary suffixes, as nccl-tests' -b/-e).
func ParseSizes(s string) ([]int64, error) {
	var out []int64
	for _, field := range strings.Split(s, ",") {
		f := strings.TrimSpace(field)
		mult := int64(1)
		if n := len(f); n > 0 {
			switch f[n-1] {
			case 'K', 'k':
				mult = 1 << 10
			case 'M', 'm':
				mult = 1 << 20
			case 'G', 'g':
				mult = 1 << 30
			}
			if mult > 1 {
				f = f[:n-1]
			}
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive size (use e.g. 1M,4M,512K)", field)
		}
		if v*mult < 4 || v*mult%4 != 0 {
			return nil, fmt.Errorf("%q is not a whole number of fp32 values (a multiple of 4 bytes)", field)
		}
		out = append(out, v*mult)
	}
	return out, nil
}

// rankAnswer is one rank's answer (cs_bench_allreduce).
type rankAnswer struct {
	Backend   string `json:"backend"`
	Version   string `json:"version"`
	WorldSize int    `json:"world_size"`
	Rank      int    `json:"rank"`
	Device    string `json:"device"`
	Results   []struct {
		Bytes int64     `json:"bytes"`
		Count int64     `json:"count"`
		MS    []float64 `json:"ms"`     // sync: per timed iteration
		AvgMS float64   `json:"avg_ms"` // nccl-tests: the back-to-back loop's time per iteration
		// Compute: the compute loop alone and beside the collectives (Interference).
		Compute *rankCompute `json:"compute"`
	} `json:"results"`
}

// Row is one message size of the report. Each rank's time of a collective
// includes waiting for the ranks that arrive later; the last rank to arrive
// waits for nobody. So MS, the transfer time, is the least over ranks (per
// iteration in sync mode, then the median over iterations; of the per-rank
// loop averages in nccl-tests mode), SkewMS the most over ranks less the
// least (the arrival skew, a straggler metric of its own) and SlowestMS the
// most (what the slowest rank saw). The bandwidths are nccl-tests' of MS:
// algbw = bytes / time, busbw = algbw * 2(n-1)/n.
type Row struct {
	Bytes     int64   `json:"bytes"`
	Count     int64   `json:"count"`
	MS        float64 `json:"ms"`
	SkewMS    float64 `json:"skew_ms"`
	SlowestMS float64 `json:"slowest_ms"`
	MinMS     float64 `json:"min_ms"`  // sync: the fastest iteration's transfer time (nccl-tests: MS)
	MaxMS     float64 `json:"max_ms"`  // sync: the slowest iteration's transfer time (nccl-tests: MS)
	MeanMS    float64 `json:"mean_ms"` // sync: the mean over iterations of the transfer time (nccl-tests: MS)
	AlgBWGBs  float64 `json:"algbw_gbs"`
	BusBWGBs  float64 `json:"busbw_gbs"`
	// Compute is what a collective of this size costs the compute beside it
	// (AllReduce.Interference; nil without).
	Compute *ComputeRow `json:"compute,omitempty"`
}

// FitMS is the time a cost-model fit takes for this size: the mean over
// iterations (a prediction is of the mean step); results written before
// mean_ms carried only the median, MS.
func (r Row) FitMS() float64 {
	if r.MeanMS > 0 {
		return r.MeanMS
	}
	return r.MS
}

// Result is the report of `casestudy bench allreduce`.
type Result struct {
	Op      string `json:"op"`
	Backend string `json:"backend"`
	Version string `json:"version"`
	Device  string `json:"device"`
	Ranks   int    `json:"ranks"`
	DType   string `json:"dtype"`
	Iters   int    `json:"iters"`
	Warmup  int    `json:"warmup"`
	Mode    string `json:"mode"`             // sync | nccl-tests
	Beside  int    `json:"beside,omitempty"` // busy compute threads per rank while timing (AllReduce.Beside)
	// Interference: pairs of the compute loop alone and beside the collectives (AllReduce.Interference).
	Interference int   `json:"interference,omitempty"`
	Rows         []Row `json:"rows"`
}

// RunRank runs one rank in this process and writes its answer (one JSON line).
func (o AllReduce) RunRank(w io.Writer) error {
	lib, err := o.Open(o.Lib)
	if err != nil {
		return err
	}
	defer lib.Close()
	dist := engine.DistConfig{Rank: o.Rank, WorldSize: o.Ranks, StoreAddr: "127.0.0.1", StorePort: o.Port, NCCLID: o.NCCLID}
	cfg := map[string]any{"device": o.Device, "sizes": o.Sizes, "iters": o.Iters, "warmup": o.Warmup, "dist": dist,
		"mode": o.mode()}
	if o.Staged {
		dist.Backend = engine.BackendStaged
		cfg["dist"] = dist
	}
	switch {
	case o.Device == "cuda" && o.Staged: // the ranks share GPU 0 and the host's cores, as a one-GPU rehearsal's
		cfg["device_index"] = 0
		cfg["threads"] = max(1, runtime.NumCPU()/o.Ranks)
	case o.Device == "cuda":
		cfg["device_index"] = o.Rank
	default:
		cfg["threads"] = 1
		if o.Interference > 0 {
			cfg["compute_pairs"] = o.Interference
		}
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	stop := busy(o.Beside)
	out, err := lib.BenchAllReduce(raw)
	stop()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}

// Run starts the ranks as processes of exe (the casestudy binary, RankArgs)
// and combines their answers. The first rank to fail is the cause; the others
// are stopped.
func (o AllReduce) Run(ctx context.Context, exe string) (Result, error) {
	var rendezvous []string
	if o.Device == "cuda" && !o.Staged { // NCCL's id; Gloo (staged too) meets on a TCP store
		lib, err := o.Open(o.Lib)
		if err != nil {
			return Result{}, err
		}
		id, err := lib.NCCLUniqueID()
		lib.Close()
		if err != nil {
			return Result{}, err
		}
		rendezvous = []string{"--nccl-id", id}
	} else {
		port, err := freeLoopbackPort()
		if err != nil {
			return Result{}, err
		}
		rendezvous = []string{"--port", strconv.Itoa(port)}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	answers := make([]rankAnswer, o.Ranks)
	var (
		mu       sync.Mutex
		firstErr error // the first rank to fail; the others are killed, not causes
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
			cancel() // the other ranks would wait for this one until their timeout
		}
	}
	for r := 0; r < o.Ranks; r++ {
		cmd := exec.CommandContext(ctx, exe, o.RankArgs(r, rendezvous)...)
		// Each rank in a session of its own, as launch.Local starts a
		// training rank: with the kernel's autogroup scheduling a session is
		// a scheduling group, so the ranks share the CPU as the trained ones.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			return Result{}, err
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				fail(fmt.Errorf("rank %d: %w: %s", r, err, strings.TrimSpace(lastLines(stderr.String(), 20))))
				return
			}
			if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &answers[r]); err != nil {
				fail(fmt.Errorf("rank %d: unreadable answer: %w: %.300q", r, err, stdout.String()))
			}
		}(r)
	}
	wg.Wait()
	if ctx.Err() == context.DeadlineExceeded {
		return Result{}, fmt.Errorf("bench allreduce: not done within --timeout %v", o.Timeout)
	}
	if firstErr != nil {
		return Result{}, firstErr
	}
	return combineRanks(answers, o)
}

func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// combineRanks takes, per size, the least time over ranks as the transfer
// time and the spread over ranks as the arrival skew (Row): in sync mode per
// iteration, then the median over iterations; in nccl-tests mode of the
// ranks' loop averages.
func combineRanks(ranks []rankAnswer, o AllReduce) (Result, error) {
	r0 := ranks[0]
	res := Result{Op: "all_reduce_sum", Backend: r0.Backend, Version: r0.Version, Device: r0.Device,
		Ranks: len(ranks), DType: "fp32", Iters: o.Iters, Warmup: o.Warmup, Mode: o.mode(), Beside: o.Beside,
		Interference: o.Interference}
	n := float64(len(ranks))
	for i, size := range r0.Results {
		iters := len(size.MS)
		if o.mode() == ModeNCCLTests {
			iters = 1 // the loop's average stands for the iterations
		}
		if iters == 0 {
			return Result{}, fmt.Errorf("no timed iterations for %d bytes", size.Bytes)
		}
		least, most := make([]float64, iters), make([]float64, iters)
		for k, rk := range ranks {
			if i >= len(rk.Results) || len(rk.Results[i].MS) != len(size.MS) {
				return Result{}, fmt.Errorf("rank %d answered a different set of sizes or iterations than rank 0", rk.Rank)
			}
			times := rk.Results[i].MS
			if o.mode() == ModeNCCLTests {
				times = []float64{rk.Results[i].AvgMS}
			}
			for j, ms := range times {
				if k == 0 || ms < least[j] {
					least[j] = ms
				}
				most[j] = max(most[j], ms)
			}
		}
		skew := make([]float64, iters)
		for j := range skew {
			skew[j] = most[j] - least[j]
		}
		slices.Sort(least)
		row := Row{Bytes: size.Bytes, Count: size.Count, MS: stats.DescribeOf(least).Median,
			SkewMS: stats.DescribeOf(skew).Median, SlowestMS: stats.DescribeOf(most).Median,
			MinMS: least[0], MaxMS: least[len(least)-1], MeanMS: mean(least)}
		if row.MS > 0 {
			row.AlgBWGBs = float64(size.Bytes) / (row.MS * 1e6)
			row.BusBWGBs = row.AlgBWGBs * 2 * (n - 1) / n
		}
		if o.Interference > 0 {
			per := make([]*rankCompute, len(ranks))
			for k, rk := range ranks {
				per[k] = rk.Results[i].Compute
			}
			c, err := combineCompute(per, size.Bytes)
			if err != nil {
				return Result{}, err
			}
			row.Compute = &c
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

func mean(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}
