package runner

import (
	"fmt"
	"strings"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// The plan-time memory check of a rehearsal: every rank of a trial shares a
// GPU (or the host) with the others, so a rank count that cannot fit is
// refused before the first launch, with the number that would, instead of
// being discovered as an out-of-memory error.
//
// One rank's memory is estimated by RankEstimate (rehearse_estimate.go,
// calibrated on measured peaks). It is an estimate (the report shows it
// beside the measured peak), so a rank count is refused only when the ranks
// sharing one device need more than 90% of its memory.

const fitHeadroom = store.RehearsalFitHeadroom

// DescribeModel is binding.Library.Describe: a model's static facts.
type DescribeModel func(cfg engine.Config) (engine.Description, error)

// FitTarget is what a rehearsal's ranks share: Devices GPUs of Capacity
// bytes each (cuda), or the host's memory (cpu).
type FitTarget struct {
	Device   string // cuda | cpu
	Devices  int    // GPUs the ranks go round-robin over (cpu: 1)
	Capacity int64  // bytes of one device; 0: unknown, nothing is refused
	What     string // "one NVIDIA H100 80GB HBM3's memory", "the host's memory"
}

// RehearsalTarget is this machine's FitTarget: its GPUs (NVML) or its host.
func (m *Machine) RehearsalTarget(host store.Host) FitTarget {
	if m.Device == "cuda" {
		mem, name := m.gpuMemory()
		return FitTarget{Device: "cuda", Devices: max(len(m.GPUs), 1), Capacity: mem, What: fmt.Sprintf("one %s's memory", rehearsalOr(name, "GPU"))}
	}
	return FitTarget{Device: "cpu", Devices: 1, Capacity: int64(host.MemBytes), What: "the host's memory"}
}

// RehearsalFit is the plan-time check of a rehearsal's memory.
type RehearsalFit struct {
	Estimates map[string]int64 // per rank, by trial ID
	// Models: each estimate's static and per-sample parts (RankEstimateModel).
	Models map[string]store.RankMemoryModel
	// Unfit: with --rehearse-distinct, the trials whose ranks do not fit
	// but whose layout and paths (pathKey) a trial that fits rehearses; the
	// runner records them skipped with this reason.
	Unfit map[string]string
	// NoReference: the multi-rank trials whose one-rank reference (the
	// global batch on one rank, alone on a device) does not fit one device;
	// the runner records it skipped with this reason and the losses are not
	// compared.
	NoReference map[string]string
	// NoTwin: the tensor-parallel trials in 16-bit whose fp32 twin (the
	// trial's ranks in fp32, store.RehearsalTrial.TwinFP32) fits the device
	// at no micro-batch: the runner records it skipped with this reason and
	// the report says the layout is not checked (report/rehearsal.go).
	NoTwin map[string]string
	// TwinMicroBatch: the tensor-parallel trials in 16-bit whose fp32 twin
	// does not fit at the trial's micro-batch, and the largest smaller one at
	// which it and its one-rank fp32 reference do (twinMicroBatch).
	TwinMicroBatch map[string]int
	Rows           []FitRow // every trial, in plan order (casestudy plan --rehearse)
}

// FitRow is one trial's estimate against its target.
type FitRow struct {
	ID        string
	Layout    string // pathKey: ranks, dp x pp, micro-batch, precision, ...
	Ranks     int
	Shared    int   // ranks on the busiest device
	Estimate  int64 // one rank
	Budget    int64 // 90% of one device (0: unknown)
	Fits      bool
	CoveredBy string // distinct: the trial that rehearses this layout ("" for itself)
	Reference int64  // the one-rank reference's estimate (0: one rank, none)
}

// CheckRehearsalFit estimates every trial's ranks against the device they
// share (cuda: one GPU's memory for the ranks round-robin on it; cpu: the
// host's memory for all ranks) and refuses the plan when one does not fit,
// naming the trial and how many ranks would. With distinct (one trial per
// pathKey), the trials that fit run and those that do not are in Unfit with
// the reason (the runner records them skipped): another trial of the same
// layout and paths rehearses it (the first that fits, in plan order), or
// none fits and the layout is refused with the number that would; the plan
// is refused only when no trial fits at all.
func CheckRehearsalFit(s *study.Study, plan *study.Plan, m *Machine, describe DescribeModel, target FitTarget, distinct bool) (*RehearsalFit, error) {
	out := &RehearsalFit{Estimates: map[string]int64{}, Models: map[string]store.RankMemoryModel{}, Unfit: map[string]string{}, NoReference: map[string]string{}, NoTwin: map[string]string{},
		TwinMicroBatch: map[string]int{}}
	budget := int64(float64(target.Capacity) * fitHeadroom)
	devices := max(target.Devices, 1)
	var refusals []string
	refusalOf := map[int]string{}
	firstFit := map[string]string{} // pathKey -> first trial that fits
	for _, t := range plan.Trials {
		sp, err := buildSpec(s, t, m)
		if err != nil {
			return nil, err
		}
		cfg := sp.Configs[0]
		whole := cfg // the whole model's static facts: RankEstimate takes a tensor rank's share itself
		whole.TP = nil
		d, err := describe(whole)
		if err != nil {
			return nil, fmt.Errorf("trial %s: describing %s %s: %w", t.ID, cfg.Family, cfg.Preset, err)
		}
		per, model := rankEstimate(cfg, d)
		out.Estimates[t.ID], out.Models[t.ID] = per, model
		shared := (sp.Ranks + devices - 1) / devices
		row := FitRow{ID: t.ID, Layout: pathKey(sp), Ranks: sp.Ranks, Shared: shared, Estimate: per, Budget: budget,
			Fits: target.Capacity <= 0 || int64(shared)*per <= budget}
		if cfg.Dist.WorldSize > 1 {
			ref := referenceConfig(cfg)
			row.Reference = RankEstimate(ref, d)
			if target.Capacity > 0 && row.Reference > budget {
				out.NoReference[t.ID] = fmt.Sprintf("the one-rank reference (micro-batch %d, grad_accum %d) needs about %s (estimate), more than %s of %s: not launched, the losses are not compared",
					ref.MicroBatch, ref.GradAccum, rehearsalGiB(row.Reference), rehearsalGiB(budget), target.What)
			}
		}
		if tpDegree(cfg) > 1 && cfg.Precision != "fp32" && target.Capacity > 0 {
			switch mb, why := twinMicroBatch(cfg, d, shared, budget, target); {
			case mb == 0:
				out.NoTwin[t.ID] = why
			case mb < cfg.MicroBatch:
				out.TwinMicroBatch[t.ID] = mb
			}
		}
		if row.Fits && firstFit[row.Layout] == "" {
			firstFit[row.Layout] = t.ID
		}
		if !row.Fits {
			fit := int(budget / per)
			dp, stages, micro := layoutOf(sp)
			refusalOf[len(out.Rows)] = fmt.Sprintf("trial %s (%d ranks: %sdata parallel %d x %d stages, micro-batch %d): %d ranks share %s, "+
				"about %s each (estimate), %s in all against %s of %s; %d ranks per device fit (%d ranks on this machine)",
				t.ID, sp.Ranks, tpLayoutPhrase(cfg), dp, stages, micro, shared, rehearsalDevice(target.Device), rehearsalGiB(per), rehearsalGiB(int64(shared)*per),
				rehearsalGiB(budget), target.What, fit, fit*devices)
		}
		out.Rows = append(out.Rows, row)
	}
	for i := range out.Rows {
		row := &out.Rows[i]
		if row.Fits {
			if distinct && firstFit[row.Layout] != row.ID {
				row.CoveredBy = firstFit[row.Layout]
			}
			continue
		}
		refusals = append(refusals, refusalOf[i])
		switch by := firstFit[row.Layout]; {
		case !distinct:
		case by != "":
			row.CoveredBy = by
			out.Unfit[row.ID] = fmt.Sprintf("does not fit this machine (%s); its layout and paths are rehearsed by trial %s (%s)",
				refusalOf[i], by, row.Layout)
		default:
			out.Unfit[row.ID] = fmt.Sprintf("refused at plan time, not rehearsed: %s; no trial of its layout and paths fits (%s)", refusalOf[i], row.Layout)
		}
	}
	if distinct && len(firstFit) > 0 {
		refusals = nil // the trials that fit run; the others are skipped with their reasons
	}
	if len(refusals) > 0 {
		return out, exitcode.With(exitcode.Environment, fmt.Errorf(
			"%s: the rehearsal does not fit this machine (docs/rehearsal.md):\n  %s\nlower workload.gpus or the micro-batch, or rehearse on a machine with more GPUs",
			s.Path, strings.Join(refusals, "\n  ")))
	}
	return out, nil
}

// twinMicroBatch is the micro-batch of a tensor-parallel trial's fp32 twin:
// the trial's own when the twin's shared ranks fit the budget, else the
// largest smaller one at which they do and its one-rank fp32 reference (the
// twin's global batch on one rank) fits one device; 0 and the reason when
// none does. The twin checks the layout's arithmetic (the sharded layers, the
// collectives, the vocabulary-parallel loss against one rank in fp32), which
// does not depend on the micro-batch.
func twinMicroBatch(cfg engine.Config, d engine.Description, shared int, budget int64, target FitTarget) (int, string) {
	twin := cfg
	twin.Precision = "fp32"
	var tw, ref int64 // at the last micro-batch tried: 1 when none fits
	for mb := max(cfg.MicroBatch, 1); mb >= 1; mb-- {
		twin.MicroBatch = mb
		tw, ref = RankEstimate(twin, d), RankEstimate(referenceConfig(twin), d)
		if int64(shared)*tw <= budget && ref <= budget {
			return mb, ""
		}
	}
	return 0, fmt.Sprintf("the trial's fp32 twin fits at no micro-batch from %d down to 1: at 1 it needs about %s a rank (estimate), %s for the %d ranks on %s, "+
		"and its one-rank fp32 reference %s, against %s of %s: not launched",
		cfg.MicroBatch, rehearsalGiB(tw), rehearsalGiB(int64(shared)*tw), shared, rehearsalDevice(target.Device),
		rehearsalGiB(ref), rehearsalGiB(budget), target.What)
}

func rehearsalDevice(device string) string {
	if device == "cuda" {
		return "one GPU"
	}
	return "the host"
}

func rehearsalOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func rehearsalGiB(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// gpuMemory is one GPU's memory and name from NVML (0 and "" without it).
func (m *Machine) gpuMemory() (int64, string) {
	if m.NVML == nil {
		return 0, ""
	}
	info, err := m.NVML.Info()
	if err != nil || len(info.GPUs) == 0 {
		return 0, ""
	}
	return int64(info.GPUs[0].MemBytes), info.GPUs[0].Name
}
