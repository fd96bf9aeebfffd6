package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/bench"
	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/internal/exitcode"
)

func init() { register(newBenchCommand) }

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Microbenchmarks on the engine's own building blocks",
	}
	cmd.AddCommand(graceful(newBenchAllReduceCommand()))
	return cmd
}

func newBenchAllReduceCommand() *cobra.Command {
	o := bench.AllReduce{Open: func(path string) (bench.Library, error) {
		lib, err := binding.Load(path)
		if err != nil {
			return nil, err // not a nil *binding.Library in a non-nil interface
		}
		return lib, nil
	}}
	var sizes string
	var child, asJSON bool
	cmd := &cobra.Command{
		Use:   "allreduce",
		Short: "All-reduce bandwidth on the engine's communicator (NCCL on GPUs, Gloo on CPUs)",
		Long: "allreduce starts --ranks local processes of this binary, each one rank of the engine's " +
			"communicator (the one the DDP reducer uses: NCCL for --device cuda, rank r on GPU r; Gloo for " +
			"cpu), and times an fp32 sum all-reduce of each size. Each size is checked once for a correct " +
			"sum and --warmup iterations are discarded. --mode sync times --iters one by one on the " +
			"communication stream (CUDA events; the host clock of the Gloo call), the host waiting after each; " +
			"--mode nccl-tests times them as nccl-tests does: after a barrier, back to back, one host wait, " +
			"the loop's time divided by --iters. A rank's time includes waiting for the ranks that arrive " +
			"later, so the time shown is the least over ranks (in sync mode per iteration, then the median " +
			"over iterations), the skew the most less the least, and the bandwidths are nccl-tests': " +
			"algbw = bytes / time, busbw = algbw * 2(n-1)/n.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Sizes, err = bench.ParseSizes(sizes); err != nil {
				return exitcode.Usage(fmt.Errorf("--sizes: %w", err))
			}
			if err := o.Validate(); err != nil {
				return exitcode.Usage(err)
			}
			if o.Lib, err = engine.Discover(engineLibFlag(cmd)); err != nil {
				return err
			}
			if child {
				return o.RunRank(cmd.OutOrStdout())
			}
			exe, err := os.Executable()
			if err != nil {
				return exitcode.With(exitcode.Environment, err)
			}
			res, err := o.Run(cmd.Context(), exe)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			return bench.WriteTable(cmd.OutOrStdout(), res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&sizes, "sizes", "1M,4M,16M,64M", "message sizes in bytes, comma separated, with K/M/G suffixes (binary: 1M = 1048576)")
	f.IntVar(&o.Ranks, "ranks", 2, "number of ranks (local processes)")
	f.StringVar(&o.Device, "device", "cpu", "cpu (Gloo) or cuda (NCCL, rank r on GPU r; with --staged: Gloo through host buffers, every rank on GPU 0)")
	f.IntVar(&o.Iters, "iters", 20, "timed iterations per size")
	f.IntVar(&o.Warmup, "warmup", 5, "discarded iterations per size")
	f.StringVar(&o.Mode, "mode", bench.ModeSync, "sync (each iteration waited for and timed on its own) or nccl-tests (back to back, one wait, as nccl-tests times)")
	durationVar(f, &o.Timeout, "timeout", 10*time.Minute, time.Second, 24*time.Hour, "deadline for the whole benchmark")
	f.IntVar(&o.Beside, "beside", 0, "cpu: each rank runs this many busy compute threads while it times, as a training "+
		"step's compute shares the cores with the collectives it overlaps (predict --fit-beside, docs/predict.md)")
	f.IntVar(&o.Interference, "interference", 0, "cpu, sync mode: per size, this many pairs of a compute loop (one thread of fp32 "+
		"matmuls) on every rank at once, alone and beside all-reduces of the size: the compute a collective costs the "+
		"backward it overlaps (predict --fit-stretch, docs/predict.md)")
	f.BoolVar(&o.Staged, "staged", false, "the host-staged backend of a rehearsal (gloo-staged: each collective copied to a "+
		"pinned host buffer, reduced by Gloo there, copied back; on cuda every rank on GPU 0, sharing it as a one-GPU "+
		"rehearsal's ranks do): the collective a rehearsal's prediction needs, copies included (docs/predict.md)")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	// one rank, started by the parent (bench.AllReduce.RankArgs)
	f.BoolVar(&child, "child", false, "internal: run one rank")
	f.IntVar(&o.Rank, "rank", 0, "internal: this child's rank")
	f.IntVar(&o.Port, "port", 0, "internal: the Gloo store port")
	f.StringVar(&o.NCCLID, "nccl-id", "", "internal: the NCCL unique id")
	for _, name := range []string{"child", "rank", "port", "nccl-id"} {
		_ = f.MarkHidden(name)
	}
	return cmd
}
