package knobs

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/engine"
)

// NVLSEnableVar is NCCL's switch for NVLink multicast (NVLS). casestudy never
// sets it to 1: NVLS can take a shared host's GPUs out of service.
const NVLSEnableVar = "NCCL_NVLS_ENABLE"

// IsNVLS reports whether an nccl.algo value needs NVLink multicast.
func IsNVLS(algo string) bool { return algo == "NVLS" || algo == "NVLSTree" }

// Environment returns the environment of a trial's ranks from its knob values
// (missing knobs take their defaults): every Env knob with a value other than
// auto or default sets its variable; auto neither sets nor unsets it, so the
// runner's environment (a cluster's exported NCCL_IB_HCA, say) stands;
// default puts the variable in unset, and the runner removes it even when
// the parent shell set it. NCCL_NVLS_ENABLE is set to 0 in
// every trial, except a trial whose nccl.algo is NVLS/NVLSTree (only planned
// with sweep.allow_nvls): then it is neither set nor unset and the parent's
// value stands. It is never set to 1. Both results are sorted.
func Environment(values map[string]string) (set map[string]string, unset []string) {
	set = map[string]string{}
	for _, k := range registry {
		if k.Apply != Env {
			continue
		}
		v, ok := values[k.Name]
		if !ok {
			v = k.Default
		}
		if v == Auto || v == "" {
			continue // inherited
		}
		if v == Default {
			unset = append(unset, k.EnvVar)
			continue
		}
		if k.Type == Bool {
			v = map[string]string{"true": "1", "false": "0"}[v]
		}
		set[k.EnvVar] = v
	}
	if !IsNVLS(values["nccl.algo"]) {
		set[NVLSEnableVar] = "0"
	}
	sort.Strings(unset)
	return set, unset
}

// EngineConfig fills the knob-driven fields of cfg from a trial's knob values
// (missing knobs take their defaults). Family, preset, device, seed and the
// distributed placement are the caller's.
func EngineConfig(values map[string]string, cfg *engine.Config) error {
	r := reader{values: values}
	cfg.Precision = r.str("precision")
	cfg.Graphs = r.boolean("graphs")
	cfg.GradAccum = r.integer("grad_accum")
	cfg.MicroBatch = r.integer("micro_batch")
	cfg.SeqLen = r.integer("seq_len")
	cfg.ImageSize = r.integer("image_size")
	cfg.ActivationCheckpointing = r.boolean("activation_checkpointing")
	cfg.ChannelsLast = r.boolean("channels_last")

	cfg.DDP.BucketMB = r.float("ddp.bucket_mb")
	cfg.DDP.FirstBucketMB = r.float("ddp.first_bucket_mb")
	cfg.DDP.Overlap = r.boolean("ddp.overlap")
	cfg.DDP.Compression, cfg.DDP.TopKRatio = r.str("ddp.compression"), 0
	if ratio, ok := strings.CutPrefix(cfg.DDP.Compression, "topk:"); ok {
		cfg.DDP.Compression = "topk"
		cfg.DDP.TopKRatio = r.parseFloat("ddp.compression", ratio)
	} else if cfg.DDP.Compression == "topk" {
		cfg.DDP.TopKRatio = r.float("ddp.topk_ratio")
	}

	cfg.Pipeline.Stages = r.integer("pipeline.stages")
	cfg.Pipeline.Microbatches = r.integer("pipeline.microbatches")
	cfg.Pipeline.Schedule = r.str("pipeline.schedule")
	cfg.Pipeline.Balance = Balance(r.str("pipeline.balance"))
	cfg.Pipeline.BalanceBy = BalanceBy(r.str("pipeline.balance"))

	cfg.Zero.Stage = r.integer("zero.stage")
	cfg.Zero.OverlapGather = nil // the engine's default, true
	if !r.boolean("zero.overlap_gather") {
		off := false
		cfg.Zero.OverlapGather = &off
	}

	cfg.TP = nil // tensor parallelism only when the degree splits something
	if d := r.integer("tp.degree"); d > 1 {
		cfg.TP = &engine.TPConfig{Degree: d, SequenceParallel: r.boolean("tp.sequence_parallel")}
	}

	cfg.FP8 = nil
	if cfg.Precision == "fp8" {
		cfg.FP8 = &engine.FP8Config{Scaling: r.str("fp8.scaling"), Grad: r.str("fp8.grad")}
	}

	cfg.ResNet = nil
	if f := r.str("resnet.fusion"); f != "off" {
		cfg.ResNet = &engine.ResNetConfig{Fusion: f}
	}

	cfg.Fault = engine.FaultConfig{}
	if kind := r.str("fault.kind"); kind != "none" {
		cfg.Fault = engine.FaultConfig{Kind: kind, Rank: r.integer("fault.rank"),
			AtStep: r.integer("fault.at_step"), SlowMS: r.integer("fault.slow_ms")}
	}
	return r.err
}

// Launch is what the runner needs from a trial's launcher knobs.
type Launch struct {
	MPS             bool
	ActiveThreadPct int // 0: auto (MPS default, all SMs)
	ProcsPerGPU     int
	ProfileSteps    int // 0: off
}

// LaunchSettings reads a trial's launcher knobs.
func LaunchSettings(values map[string]string) (Launch, error) {
	r := reader{values: values}
	l := Launch{MPS: r.boolean("mps"), ActiveThreadPct: r.integer("mps.active_thread_pct"),
		ProcsPerGPU: r.integer("procs_per_gpu"), ProfileSteps: r.integer("profile")}
	return l, r.err
}

// reader reads canonical knob values, remembering the first error.
type reader struct {
	values map[string]string
	err    error
}

func (r *reader) str(name string) string {
	if v, ok := r.values[name]; ok {
		return v
	}
	if k, ok := Lookup(name); ok {
		return k.Default
	}
	r.fail(fmt.Errorf("knobs: no knob %q", name))
	return ""
}

func (r *reader) boolean(name string) bool {
	switch v := r.str(name); v {
	case "true":
		return true
	case "false":
		return false
	default:
		r.fail(fmt.Errorf("knob %s: %q is not true or false", name, v))
		return false
	}
}

// integer returns 0 for auto and off.
func (r *reader) integer(name string) int {
	v := r.str(name)
	if v == Auto || v == Off {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.fail(fmt.Errorf("knob %s: %q is not an integer", name, v))
	}
	return n
}

func (r *reader) float(name string) float64 { return r.parseFloat(name, r.str(name)) }

func (r *reader) parseFloat(name, v string) float64 {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		r.fail(fmt.Errorf("knob %s: %q is not a number", name, v))
	}
	return f
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}
