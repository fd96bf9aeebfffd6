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
// One rank's memory is estimated from the model's static facts (cs_describe):
//
//	weights, gradients and AdamW's two moments: 16 bytes per parameter of the
//	  rank's stage (parameters / stages), plus the DDP compression's wire copy;
//	activations: per sample and layer of the stage, Korthikanti et al.'s
//	  s*h*34 bytes for a transformer block in 16-bit (twice that in fp32),
//	  plus the logits and their gradient (s*V*8 bytes, fp32); ResNet-50:
//	  100 MiB per 224x224 sample in fp32 (half in 16-bit), by the image's area;
//	  times the micro-batches a stage holds (GPipe: all of them; 1F1B: at
//	  most the stage count);
//	the process: 512 MiB (CUDA context and libraries; on CPU the runtime).
//
// It is an estimate (the report shows it beside the measured peak), so a
// rank count is refused only when the ranks sharing one device need more
// than 90% of its memory.

const (
	fitProcessBytes = 512 << 20
	fitHeadroom     = 0.9
	bytesPerParam   = 16
	resnetSample    = 100 << 20
)

// DescribeModel is binding.Library.Describe: a model's static facts.
type DescribeModel func(cfg engine.Config) (engine.Description, error)

// RankEstimate is the estimated memory of one rank of cfg, in bytes.
func RankEstimate(cfg engine.Config, d engine.Description) int64 {
	stages := max(cfg.Pipeline.Stages, 1)
	params := float64(d.Params) / float64(stages)
	static := params * bytesPerParam
	switch cfg.DDP.Compression {
	case "fp16", "bf16":
		static += params * 2
	case "topk":
		static += params * 4 // the error-feedback residual (fp32)
	}
	half := cfg.Precision == "bf16" || cfg.Precision == "fp16" || cfg.Precision == "fp8" // fp8: bf16 activations
	sh := d.Shapes
	var perSample float64
	switch {
	case sh["image_size"] > 0:
		side := float64(sh["image_size"]) / 224
		perSample = resnetSample * side * side / float64(stages)
		if half {
			perSample /= 2
		}
	default:
		s, h, layers, vocab := float64(sh["seq_len"]), float64(sh["hidden"]), float64(sh["layers"]), float64(sh["vocab"])
		if cfg.SeqLen > 0 {
			s = float64(cfg.SeqLen)
		}
		block := s * h * 34
		if !half {
			block *= 2
		}
		perSample = block*layers/float64(stages) + s*vocab*8/float64(stages)
	}
	inFlight := 1 // accumulated micro-batches free their activations one by one
	if stages > 1 {
		m := max(cfg.Pipeline.Microbatches, 1)
		inFlight = m
		if cfg.Pipeline.Schedule == "1f1b" {
			inFlight = min(m, stages)
		}
	}
	acts := perSample * float64(max(cfg.MicroBatch, 1)) * float64(inFlight)
	return int64(static+acts) + fitProcessBytes
}

// CheckRehearsalFit estimates every trial's ranks against the device they
// share (m.Device cuda: one GPU's memory for the ranks round-robin on it;
// cpu: the host's memory for all ranks) and refuses the plan when one does
// not fit, naming the trial and how many ranks would. It returns each
// trial's estimate per rank, by trial ID.
func CheckRehearsalFit(s *study.Study, plan *study.Plan, m *Machine, describe DescribeModel, host store.Host) (map[string]int64, error) {
	capacity, what := int64(host.MemBytes), "the host's memory"
	devices := 1
	if m.Device == "cuda" {
		mem, name := m.gpuMemory()
		capacity, what, devices = mem, fmt.Sprintf("one %s's memory", rehearsalOr(name, "GPU")), max(len(m.GPUs), 1)
	}
	out := map[string]int64{}
	var refused []string
	for _, t := range plan.Trials {
		sp, err := buildSpec(s, t, m)
		if err != nil {
			return nil, err
		}
		cfg := sp.Configs[0]
		d, err := describe(cfg)
		if err != nil {
			return nil, fmt.Errorf("trial %s: describing %s %s: %w", t.ID, cfg.Family, cfg.Preset, err)
		}
		per := RankEstimate(cfg, d)
		out[t.ID] = per
		if capacity <= 0 {
			continue // unknown capacity: nothing to refuse against
		}
		shared := (sp.Ranks + devices - 1) / devices
		budget := int64(float64(capacity) * fitHeadroom)
		if int64(shared)*per <= budget {
			continue
		}
		fit := int(budget / per)
		dp, stages, micro := layoutOf(sp)
		refused = append(refused, fmt.Sprintf("trial %s (%d ranks: data parallel %d x %d stages, micro-batch %d): %d ranks share %s, "+
			"about %s each (estimate), %s in all against %s of %s; %d ranks per device fit (%d ranks on this machine)",
			t.ID, sp.Ranks, dp, stages, micro, shared, rehearsalDevice(m), rehearsalGiB(per), rehearsalGiB(int64(shared)*per), rehearsalGiB(budget), what, fit, fit*devices))
	}
	if len(refused) > 0 {
		return out, exitcode.With(exitcode.Environment, fmt.Errorf(
			"%s: the rehearsal does not fit this machine (docs/rehearsal.md):\n  %s\nlower workload.gpus or the micro-batch, or rehearse on a machine with more GPUs",
			s.Path, strings.Join(refused, "\n  ")))
	}
	return out, nil
}

func rehearsalDevice(m *Machine) string {
	if m.Device == "cuda" {
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
