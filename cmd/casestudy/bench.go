package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/stats"
)

func init() { register(newBenchCommand) }

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Microbenchmarks on the engine's own building blocks",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(graceful(newBenchAllReduceCommand()))
	return cmd
}

type benchAllReduceOptions struct {
	sizes   string
	ranks   int
	device  string
	iters   int
	warmup  int
	timeout time.Duration
	json    bool
	// hidden: one rank, started by the parent
	child  bool
	rank   int
	port   int
	ncclID string
}

func newBenchAllReduceCommand() *cobra.Command {
	var o benchAllReduceOptions
	cmd := &cobra.Command{
		Use:   "allreduce",
		Short: "All-reduce bandwidth on the engine's communicator (NCCL on GPUs, Gloo on CPUs)",
		Long: "allreduce starts --ranks local processes of this binary, each one rank of the engine's " +
			"communicator (the one the DDP reducer uses: NCCL for --device cuda, rank r on GPU r; Gloo for " +
			"cpu), and times an fp32 sum all-reduce of each size. Each size is checked once for a correct " +
			"sum, then --warmup iterations are discarded and --iters are timed one by one on the " +
			"communication stream (CUDA events; the host clock of the Gloo call). The time of an iteration " +
			"is the slowest rank's; the table shows the median over iterations and nccl-tests' bandwidths: " +
			"algbw = bytes / time, busbw = algbw * 2(n-1)/n.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sizes, err := parseSizes(o.sizes)
			if err != nil {
				return exitcode.Usage(fmt.Errorf("--sizes: %w", err))
			}
			if err := o.validate(); err != nil {
				return exitcode.Usage(err)
			}
			libPath, err := engine.Discover(engineLibFlag(cmd))
			if err != nil {
				return err
			}
			if o.child {
				return benchChild(cmd.OutOrStdout(), libPath, sizes, o)
			}
			res, err := benchAllReduce(cmd.Context(), libPath, sizes, o)
			if err != nil {
				return err
			}
			if o.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			return writeBenchTable(cmd.OutOrStdout(), res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.sizes, "sizes", "1M,4M,16M,64M", "message sizes in bytes, comma separated, with K/M/G suffixes (binary: 1M = 1048576)")
	f.IntVar(&o.ranks, "ranks", 2, "number of ranks (local processes)")
	f.StringVar(&o.device, "device", "cpu", "cpu (Gloo) or cuda (NCCL, rank r on GPU r)")
	f.IntVar(&o.iters, "iters", 20, "timed iterations per size")
	f.IntVar(&o.warmup, "warmup", 5, "discarded iterations per size")
	durationVar(f, &o.timeout, "timeout", 10*time.Minute, time.Second, 24*time.Hour, "deadline for the whole benchmark")
	f.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	f.BoolVar(&o.child, "child", false, "internal: run one rank")
	f.IntVar(&o.rank, "rank", 0, "internal: this child's rank")
	f.IntVar(&o.port, "port", 0, "internal: the Gloo store port")
	f.StringVar(&o.ncclID, "nccl-id", "", "internal: the NCCL unique id")
	for _, name := range []string{"child", "rank", "port", "nccl-id"} {
		_ = f.MarkHidden(name)
	}
	return cmd
}

func (o benchAllReduceOptions) validate() error {
	switch {
	case o.ranks < 1:
		return fmt.Errorf("--ranks must be at least 1, got %d", o.ranks)
	case o.device != "cpu" && o.device != "cuda":
		return fmt.Errorf("--device must be cpu or cuda, got %q", o.device)
	case o.iters < 1:
		return fmt.Errorf("--iters must be at least 1, got %d", o.iters)
	case o.warmup < 0:
		return fmt.Errorf("--warmup must not be negative, got %d", o.warmup)
	}
	return nil
}

// parseSizes reads "1M,4M,512K,100" as bytes (binary suffixes, as nccl-tests' -b/-e).
func parseSizes(s string) ([]int64, error) {
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

// benchRank is one rank's answer (cs_bench_allreduce).
type benchRank struct {
	Backend   string `json:"backend"`
	Version   string `json:"version"`
	WorldSize int    `json:"world_size"`
	Rank      int    `json:"rank"`
	Device    string `json:"device"`
	Results   []struct {
		Bytes int64     `json:"bytes"`
		Count int64     `json:"count"`
		MS    []float64 `json:"ms"`
	} `json:"results"`
}

// BenchRow is one message size of the report.
type BenchRow struct {
	Bytes    int64   `json:"bytes"`
	Count    int64   `json:"count"`
	MS       float64 `json:"ms"` // median over iterations of the slowest rank's time
	MinMS    float64 `json:"min_ms"`
	MaxMS    float64 `json:"max_ms"`
	AlgBWGBs float64 `json:"algbw_gbs"`
	BusBWGBs float64 `json:"busbw_gbs"`
}

// BenchResult is the report of `casestudy bench allreduce`.
type BenchResult struct {
	Op      string     `json:"op"`
	Backend string     `json:"backend"`
	Version string     `json:"version"`
	Device  string     `json:"device"`
	Ranks   int        `json:"ranks"`
	DType   string     `json:"dtype"`
	Iters   int        `json:"iters"`
	Warmup  int        `json:"warmup"`
	Rows    []BenchRow `json:"rows"`
}

func benchChild(w io.Writer, libPath string, sizes []int64, o benchAllReduceOptions) error {
	lib, err := binding.Load(libPath)
	if err != nil {
		return err
	}
	defer lib.Close()
	dist := engine.DistConfig{Rank: o.rank, WorldSize: o.ranks, StoreAddr: "127.0.0.1", StorePort: o.port, NCCLID: o.ncclID}
	cfg := map[string]any{"device": o.device, "sizes": sizes, "iters": o.iters, "warmup": o.warmup, "dist": dist}
	if o.device == "cuda" {
		cfg["device_index"] = o.rank
	} else {
		cfg["threads"] = 1
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	out, err := lib.BenchAllReduce(raw)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}

// benchAllReduce starts the ranks as children of this binary and combines their answers.
func benchAllReduce(ctx context.Context, libPath string, sizes []int64, o benchAllReduceOptions) (BenchResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return BenchResult{}, err
	}
	var rendezvous []string
	if o.device == "cuda" {
		lib, err := binding.Load(libPath)
		if err != nil {
			return BenchResult{}, err
		}
		id, err := lib.NCCLUniqueID()
		lib.Close()
		if err != nil {
			return BenchResult{}, err
		}
		rendezvous = []string{"--nccl-id", id}
	} else {
		port, err := freeLoopbackPort()
		if err != nil {
			return BenchResult{}, err
		}
		rendezvous = []string{"--port", strconv.Itoa(port)}
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	answers := make([]benchRank, o.ranks)
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
	for r := 0; r < o.ranks; r++ {
		args := append([]string{"bench", "allreduce", "--child", "--engine-lib", libPath,
			"--rank", strconv.Itoa(r), "--ranks", strconv.Itoa(o.ranks), "--device", o.device,
			"--sizes", o.sizes, "--iters", strconv.Itoa(o.iters), "--warmup", strconv.Itoa(o.warmup)}, rendezvous...)
		cmd := exec.CommandContext(ctx, exe, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			return BenchResult{}, err
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
		return BenchResult{}, fmt.Errorf("bench allreduce: not done within --timeout %v", o.timeout)
	}
	if firstErr != nil {
		return BenchResult{}, firstErr
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

// combineRanks takes, per size and iteration, the slowest rank's time (the
// collective is done when every rank is), then the median over iterations.
func combineRanks(ranks []benchRank, o benchAllReduceOptions) (BenchResult, error) {
	r0 := ranks[0]
	res := BenchResult{Op: "all_reduce_sum", Backend: r0.Backend, Version: r0.Version, Device: r0.Device,
		Ranks: len(ranks), DType: "fp32", Iters: o.iters, Warmup: o.warmup}
	n := float64(len(ranks))
	for i, size := range r0.Results {
		slowest := make([]float64, len(size.MS))
		for _, rk := range ranks {
			if i >= len(rk.Results) || len(rk.Results[i].MS) != len(size.MS) {
				return BenchResult{}, fmt.Errorf("rank %d answered a different set of sizes or iterations than rank 0", rk.Rank)
			}
			for j, ms := range rk.Results[i].MS {
				slowest[j] = max(slowest[j], ms)
			}
		}
		if len(slowest) == 0 {
			return BenchResult{}, fmt.Errorf("no timed iterations for %d bytes", size.Bytes)
		}
		slices.Sort(slowest)
		row := BenchRow{Bytes: size.Bytes, Count: size.Count, MS: stats.DescribeOf(slowest).Median,
			MinMS: slowest[0], MaxMS: slowest[len(slowest)-1]}
		if row.MS > 0 {
			row.AlgBWGBs = float64(size.Bytes) / (row.MS * 1e6)
			row.BusBWGBs = row.AlgBWGBs * 2 * (n - 1) / n
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

func humanBytes(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

func writeBenchTable(w io.Writer, r BenchResult) error {
	fmt.Fprintf(w, "all-reduce (sum, %s) on %d rank(s), %s %s, device %s: median of %d iterations after %d warm-up\n",
		r.DType, r.Ranks, r.Backend, r.Version, r.Device, r.Iters, r.Warmup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tcount\ttime (us)\tmin (us)\tmax (us)\talgbw (GB/s)\tbusbw (GB/s)\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\t\n", humanBytes(row.Bytes), row.Count,
			row.MS*1e3, row.MinMS*1e3, row.MaxMS*1e3, row.AlgBWGBs, row.BusBWGBs)
	}
	return tw.Flush()
}
