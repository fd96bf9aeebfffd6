package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// plan --rehearse: the plan-time memory check of a rehearsal
// (runner.CheckRehearsalFit, docs/rehearsal.md) against GPUs named on the
// command line, from any machine: which trials a rehearsal on them runs, which
// it skips as covered, and whether `run --rehearse` would refuse the study.

// planRehearseOptions are plan's rehearsal flags.
type planRehearseOptions struct {
	on       bool    // --rehearse
	distinct bool    // --rehearse-distinct
	gpus     int     // --rehearse-gpus: GPUs the rehearsal's ranks share
	gib      float64 // --rehearse-gpu-gib: memory of one, GiB
}

func withPlanRehearse(cmd *cobra.Command, o *planRehearseOptions) {
	f := cmd.Flags()
	f.BoolVar(&o.on, "rehearse", false, "show the rehearsal's plan-time memory check: every trial's ranks on --rehearse-gpus GPUs of --rehearse-gpu-gib GiB (exit status 3 when run --rehearse would refuse the study; docs/rehearsal.md)")
	f.BoolVar(&o.distinct, "rehearse-distinct", false, "with --rehearse: one trial per distinct layout and path, as run --rehearse-distinct")
	f.IntVar(&o.gpus, "rehearse-gpus", 1, "with --rehearse: GPUs the rehearsal's ranks share")
	f.Float64Var(&o.gib, "rehearse-gpu-gib", 80, "with --rehearse: memory of one GPU in GiB (the H100's 80 GB are 79.6 GiB)")
	// Without --rehearse plan makes no memory check: the flags would be ignored.
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if o.on {
			return nil
		}
		var given []string
		for _, n := range []string{"rehearse-distinct", "rehearse-gpus", "rehearse-gpu-gib"} {
			if cmd.Flags().Changed(n) {
				given = append(given, "--"+n)
			}
		}
		if len(given) == 0 {
			return nil
		}
		return exitcode.Usage(fmt.Errorf("%s %s with --rehearse (the rehearsal's memory check); without it plan makes no memory check "+
			"and would ignore %s: add --rehearse or leave %s out", strings.Join(given, ", "), oneOrMore(len(given), "goes", "go"),
			oneOrMore(len(given), "it", "them"), oneOrMore(len(given), "it", "them")))
	}
}

// writeRehearsalFit prints the check and returns run --rehearse's refusal.
func writeRehearsalFit(w io.Writer, s *study.Study, plan *study.Plan, libFlag string, o planRehearseOptions) error {
	if o.gpus < 1 || o.gib <= 0 {
		return exitcode.Usage(fmt.Errorf("--rehearse-gpus %d, --rehearse-gpu-gib %g: want at least one GPU of more than 0 GiB", o.gpus, o.gib))
	}
	path, err := engine.Discover(libFlag)
	if err != nil {
		return exitcode.With(exitcode.Environment, fmt.Errorf("--rehearse describes the model with the engine library: %w", err))
	}
	lib, err := binding.Load(path)
	if err != nil {
		return exitcode.With(exitcode.Environment, err)
	}
	defer lib.Close()
	s.Workload.Rehearse = true
	m := &runner.Machine{Device: "cuda", Rehearse: true}
	for i := range o.gpus {
		m.GPUs = append(m.GPUs, strconv.Itoa(i))
	}
	target := runner.FitTarget{Device: "cuda", Devices: o.gpus, Capacity: int64(o.gib * (1 << 30)),
		What: fmt.Sprintf("one GPU's %g GiB", o.gib)}
	fit, ferr := runner.CheckRehearsalFit(s, plan, m, lib.Describe, target, o.distinct)
	if fit == nil {
		return ferr
	}
	fmt.Fprintf(w, "\nrehearsal on %d GPU(s) of %g GiB (estimate per rank: docs/rehearsal.md; a device's ranks may use %.0f%%):\n", o.gpus, o.gib, 100*store.RehearsalFitHeadroom)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  trial\tranks/GPU\tper rank\ton one GPU\trehearsal\tlayout")
	runs, skipped, refused, most := 0, 0, 0, 0
	for _, r := range fit.Rows {
		what := "runs"
		switch {
		case !r.Fits && r.CoveredBy != "":
			what, skipped = "skipped: does not fit; covered by "+r.CoveredBy, skipped+1
		case !r.Fits:
			what, refused = "REFUSED: does not fit", refused+1
		case r.CoveredBy != "":
			what, skipped = "skipped: covered by "+r.CoveredBy, skipped+1
		default:
			runs, most = runs+1, max(most, r.Ranks)
			if fit.NoReference[r.ID] != "" {
				what += fmt.Sprintf(" (its one-rank reference, %.1f GiB, does not fit: losses not compared)", gib(r.Reference))
			}
			if fit.NoTwin[r.ID] != "" {
				what += " (its fp32 twin fits at no micro-batch: layout not checked)"
			}
			if mb := fit.TwinMicroBatch[r.ID]; mb > 0 {
				what += fmt.Sprintf(" (its fp32 twin at micro-batch %d)", mb)
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%.1f GiB\t%.1f GiB\t%s\t%s\n", r.ID, r.Shared, gib(r.Estimate), gib(int64(r.Shared)*r.Estimate), what, r.Layout)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// One line for scripts (scripts/gpu-rehearse.sh sizes its time cap on it).
	fmt.Fprintf(w, "rehearsal: %d trials run, %d skipped, %d refused; at most %d ranks a trial\n", runs, skipped, refused, most)
	if ferr != nil {
		return ferr
	}
	fmt.Fprintln(w, "run --rehearse would not refuse this plan")
	return nil
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }
