package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/provenance/nvmlgpu"
	"github.com/casestudy/casestudy/study"
	"github.com/casestudy/casestudy/timeline"
)

func init() { register(newPlanCommand) }

type planOptions struct {
	out          string // results root searched for earlier runs (the estimate)
	json         bool
	maxTrials    int
	allowOutside bool
	gpus         int                 // --gpus: plan for this many GPUs per node; 0: this machine's (workload.gpus: all) or the study's
	engineLib    string              // --engine-lib: the library that describes the model (ZeRO memory estimate)
	rehearse     planRehearseOptions // plan_rehearse.go
}

func newPlanCommand() *cobra.Command {
	var opts planOptions
	cmd := &cobra.Command{
		Use:   "plan STUDY",
		Short: "Print the trials a study expands to, and the combinations it drops with reasons",
		Long: "plan loads a study, expands its sweep and prints one row per trial (its stable ID and the knobs " +
			"that differ from the baseline), the dropped combinations with their reasons, and the count. " +
			"Nothing runs. A greedy sweep shows its first round; later rounds depend on results. " +
			"Where the study ran before on this kind of machine (run directories under --out with the same study, " +
			"model, preset, device and GPU model), it also estimates how long the run takes from their launch timelines.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.engineLib = engineLibFlag(cmd)
			return runPlan(cmd.OutOrStdout(), args[0], opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON instead of a table")
	cmd.Flags().StringVar(&opts.out, "out", "results", "root folder of earlier run directories, for the time estimate")
	cmd.Flags().IntVar(&opts.maxTrials, "max-trials", study.DefaultMaxTrials, "largest sweep the study may expand to")
	cmd.Flags().BoolVar(&opts.allowOutside, "allow-outside", false, "let extends reach files outside the studies tree")
	cmd.Flags().IntVar(&opts.gpus, "gpus", 0, "plan for N GPUs per node, from any machine (default: the study's workload.gpus; all: this machine's GPUs)")
	withPlanTopology(cmd) // predict.go: --topology
	withPlanRehearse(cmd, &opts.rehearse)
	return cmd
}

// planJSON is `casestudy plan --json`.
type planJSON struct {
	Study    string            `json:"study"`
	Path     string            `json:"path"`
	Family   string            `json:"family"`
	Preset   string            `json:"preset"`
	Device   string            `json:"device"`
	Baseline map[string]string `json:"baseline"` // what the study sets; trials hold every knob
	*study.Plan
	Estimate *timeline.Estimate `json:"estimate,omitempty"` // from earlier runs; absent without them
}

func runPlan(w io.Writer, path string, opts planOptions) error {
	if opts.maxTrials < 1 {
		return exitcode.Usage(fmt.Errorf("--max-trials must be at least 1, got %d", opts.maxTrials))
	}
	s, err := loadStudy(path, opts.allowOutside)
	if err != nil {
		return err
	}
	if opts.gpus != 0 {
		if err := study.ApplyOverrides(s, map[string]string{"gpus": strconv.Itoa(opts.gpus)}); err != nil {
			return err
		}
	}
	if err := resolveGPUs(s, false); err != nil {
		return err
	}
	s.Workload.Rehearse = s.Workload.Rehearse || opts.rehearse.on // the rules know a rehearsal's groups
	plan, err := study.Expand(s, study.ExpandOptions{MaxTrials: opts.maxTrials})
	if err != nil {
		return err
	}
	est := estimate(s, plan, opts.out)
	if opts.json {
		return writeJSON(w, planJSON{Study: s.Name, Path: path, Family: s.Model.Family, Preset: s.Model.Preset,
			Device: s.Workload.Device, Baseline: s.Baseline, Plan: plan, Estimate: est})
	}
	if err := writePlanTable(w, s, plan); err != nil {
		return err
	}
	writeEstimate(w, s, plan, est, opts.out)
	writeModelStates(w, s, plan, opts.engineLib)
	if opts.rehearse.on {
		return writeRehearsalFit(w, s, plan, opts.engineLib, opts.rehearse)
	}
	return nil
}

// estimate is the plan's time from earlier runs of the study on this kind of
// machine under root (nil without any).
func estimate(s *study.Study, plan *study.Plan, root string) *timeline.Estimate {
	m := timeline.Machine{Study: s.Name, Family: s.Model.Family, Preset: s.Model.Preset, Device: s.Workload.Device}
	if s.Workload.Device != "cpu" {
		gpus := nvmlgpu.Open()
		if info, err := gpus.Info(); err == nil && len(info.GPUs) > 0 {
			m.GPU = info.GPUs[0].Name
		}
		gpus.Close()
	}
	ids := make([]string, len(plan.Trials))
	for i, t := range plan.Trials {
		ids[i] = t.ID
	}
	dev := s.Workload.Device // auto: a GPU when one is visible
	if dev == "auto" && m.GPU != "" {
		dev = "cuda"
	}
	warmS, measureS := s.Workload.Windows(dev)
	return timeline.EstimatePlan(timeline.FindRuns(root, m), timeline.Plan{Trials: ids, Repeats: s.Workload.MaxLaunches(),
		WarmupSteps: s.Workload.WarmupSteps, Steps: s.Workload.Steps,
		WarmupSeconds: warmS, MeasureSeconds: measureS})
}

func writeEstimate(w io.Writer, s *study.Study, plan *study.Plan, e *timeline.Estimate, root string) {
	if e == nil {
		fmt.Fprintf(w, "estimate: none yet (no earlier run of %s on this kind of machine under %s; every run records the launch timelines later plans estimate from)\n",
			s.Name, root)
		return
	}
	round := ""
	if len(plan.Rounds) > 1 {
		round = " (round 1 only: later rounds depend on results)"
	}
	launches := fmt.Sprintf("%d launches", e.Launches)
	if e.Launches == 1 {
		launches = "1 launch"
	}
	total, bound := e.Total.Round(time.Second), ""
	if s.Workload.Repeats == 0 { // repeats: auto stops each trial once it is decided
		bound = "at most "
		launches = fmt.Sprintf("at most %s (%s)", launches, s.Workload.RepeatsText())
	}
	if budget := s.Workload.MaxTime; budget > 0 && total > budget {
		total, bound = budget, "at most "
		launches += fmt.Sprintf(", cut by workload.max_time %s", budget)
	}
	fmt.Fprintf(w, "estimate: %s%s for %s%s, %.0f%% of it measured steps\n", bound, total, launches, round, e.Measured)
	fmt.Fprintf(w, "  %s\n", e.Method)
	fmt.Fprintf(w, "  earlier runs: %s\n", strings.Join(e.Dirs, ", "))
}

func writePlanTable(w io.Writer, s *study.Study, plan *study.Plan) error {
	wl := s.Workload
	fmt.Fprintf(w, "study %s (%s): %s %s, device %s, %s, %d warm-up + %d measured steps, %s\n",
		s.Name, s.Path, s.Model.Family, s.Model.Preset, wl.Device, plural(s.RanksFor(s.Baseline), "rank"),
		wl.WarmupSteps, wl.Steps, wl.RepeatsText())
	if len(s.Baseline) > 0 {
		fmt.Fprintf(w, "baseline: %s\n", study.FormatKnobs(s.Baseline, nil))
	}
	for _, n := range plan.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "strategy: %s", plan.Strategy)
	if len(plan.Rounds) > 0 {
		fmt.Fprintf(w, " (round 1 of %d: %s)", len(plan.Rounds), plan.Rounds[0])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\t#\tCHANGED FROM BASELINE")
	for _, t := range plan.Trials {
		changed := study.FormatKnobs(t.Knobs, t.Changed)
		if len(t.Changed) == 0 {
			changed = "(baseline)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", t.ID, t.Index, changed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(plan.Dropped) > 0 {
		fmt.Fprintln(w, "\ndropped:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, d := range plan.Dropped {
			fmt.Fprintf(tw, "  %s\t%s\n", study.FormatKnobs(d.Knobs, nil), d.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(plan.Rounds) > 1 {
		later := make([]string, 0, len(plan.Rounds)-1)
		for _, k := range plan.Rounds[1:] {
			later = append(later, fmt.Sprintf("%s (%d values)", k, len(s.Sweep.Knobs[k])))
		}
		fmt.Fprintf(w, "\nlater rounds depend on results: %s\n", strings.Join(later, ", "))
	}
	fmt.Fprintf(w, "\n%s, %d dropped (%s, limit %d)\n", plural(len(plan.Trials), "trial"), len(plan.Dropped),
		plural(plan.Size, "combination"), plan.Limit)
	return nil
}
