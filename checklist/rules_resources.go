package checklist

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Resource rules: MPS, memory headroom, stragglers.

var resourceRules = []*Rule{
	{
		ID: "mps", Title: "MPS for small per-GPU work", Chapter: 9, Severity: Warning,
		Rationale: "Processes sharing a GPU without MPS are time-sliced: only one context runs at a time. MPS lets " +
			"their kernels run concurrently, which helps when one process cannot fill the GPU (small models, small " +
			"micro-batches). Judged from an mps on/off pair when swept, else from the trials' settings, MFU and step time " +
			"(a long step with low MFU is not small work).",
		Needs: []string{"knobs mps, procs_per_gpu", "samples_per_s", "mfu"},
		Thresholds: []Threshold{
			{Name: "min_speedup", Default: 1.05, Unit: "x", Doc: "speed-up of mps: true that makes a recommendation (beyond noise too)"},
			{Name: "small_work_mfu", Default: 0.20, Unit: "fraction", Doc: "MFU below this marks per-GPU work as small"},
			{Name: "small_step_ms", Default: 15, Unit: "ms", Doc: "and a median step below this: a long step with low MFU is the model's arithmetic intensity, not small work"},
		},
		check: checkMPS,
	},
	{
		ID: "memory-headroom", Title: "Memory headroom", Chapter: 8, Severity: Warning,
		Rationale: "A configuration that peaks above ~90% of GPU memory is one longer sequence, allocator " +
			"fragmentation or neighbouring process away from running out. Judged on the best trial, on the memory it " +
			"holds: the caching allocator's reserved peak, which includes a captured CUDA graph's private pool (peak " +
			"allocated leaves the pool out, so under graphs it is not judged on that).",
		Needs:      []string{"mem_reserved_bytes (all ranks; mem_peak_bytes without CUDA graphs when absent)", "GPU memory"},
		Thresholds: []Threshold{{Name: "max_frac", Default: 0.90, Unit: "fraction", Doc: "largest peak share of GPU memory"}},
		check:      checkMemoryHeadroom,
	},
	{
		ID: "straggler", Title: "Straggler rank", Chapter: 20, Severity: Warning,
		Rationale: "In synchronous data parallelism every step waits for the slowest rank. Step times look equal " +
			"because the others wait in the all-reduce, so ranks are compared by their compute time " +
			"(forward + backward + optimizer). Pipeline trials are left out: their stages differ by design.",
		Needs:      []string{"per-rank steps (forward_ms, backward_ms, optimizer_ms or step_ms)", "world size > 1"},
		Thresholds: []Threshold{{Name: "max_spread", Default: 0.10, Unit: "fraction", Doc: "largest (slowest − fastest) / median of per-rank median compute time"}},
		check:      checkStraggler,
	},
}

func checkMPS(c *evalContext) verdict {
	if len(c.run.pairs("mps")) > 0 {
		win, b := winner(c.run.against("mps", "false"), c.t("min_speedup"))
		if b == nil {
			return na("the mps pairs have no throughput or step time")
		}
		if win != nil && c.run.baseline("mps") != "true" {
			b = win
			return verdict{
				Status: Finding,
				Message: fmt.Sprintf("MPS made the trial %s faster with %s process(es) per GPU (trials %s, %s)",
					x(b.Speedup), b.Alt.knob("procs_per_gpu"), b.Alt.ID, b.Base.ID),
				Evidence: []string{
					fmt.Sprintf("%s: %.4g samples/s, MFU %s", b.Alt.label(), b.Alt.Throughput, pct(b.Alt.MFU)),
					fmt.Sprintf("%s: %.4g samples/s, MFU %s", b.Base.label(), b.Base.Throughput, pct(b.Base.MFU)),
				},
				Trials:         ids(b.Alt, b.Base),
				Recommendation: "use mps: true with procs_per_gpu: " + b.Alt.knob("procs_per_gpu"),
			}
		}
		return pass("MPS changed speed by %s (trials %s, %s), below %s or within noise", x(b.Speedup), b.Alt.ID, b.Base.ID, x(c.t("min_speedup")))
	}
	if !c.run.onGPU() {
		return na("CPU run: MPS shares a GPU between processes")
	}
	var shared []*trial
	for _, t := range c.run.ok {
		if t.knobInt("procs_per_gpu", 1) > 1 && t.knob("mps") != "true" {
			shared = append(shared, t)
		}
	}
	if len(shared) > 0 {
		return verdict{
			Status: Finding,
			Message: fmt.Sprintf("%d trial(s) ran several processes per GPU without MPS, so their contexts are time-sliced (e.g. %s)",
				len(shared), shared[0].label()),
			Trials:         ids(shared...),
			Recommendation: "use mps: true whenever procs_per_gpu > 1 (sweep mps: [false, true] to measure it)",
		}
	}
	t := c.run.best
	if t == nil || t.MFU <= 0 {
		return na("no mps on/off pair, and no MFU to judge how much of the GPU one process uses")
	}
	if t.MFU < c.t("small_work_mfu") && t.StepMS >= c.t("small_step_ms") {
		return pass("the best trial %s reaches %s MFU, but its steps take %s: the work per step is not small; the low MFU "+
			"comes from the model's arithmetic intensity (memory-bound layers), which MPS does not change", t.ID, pct(t.MFU), ms(t.StepMS))
	}
	if t.MFU < c.t("small_work_mfu") && t.knobInt("procs_per_gpu", 1) == 1 {
		return verdict{
			Status:         Finding,
			Severity:       Info,
			Message:        fmt.Sprintf("the best trial %s reaches %s MFU with one process per GPU: the per-GPU work may be too small to fill the GPU", t.ID, pct(t.MFU)),
			Trials:         ids(t),
			Recommendation: "sweep procs_per_gpu: [1, 2] with mps: true to measure MPS",
		}
	}
	return pass("the best trial %s reaches %s MFU: per-GPU work is not small by this threshold", t.ID, pct(t.MFU))
}

// memHeld is what the trial holds on the GPU: the allocator's reserved peak
// (a CUDA graph's private pool included), else peak allocated when the run
// recorded no reserved bytes and no graph was replayed; 0 when unknown.
func (t *trial) memHeld() int64 {
	if t.MemHeld > 0 {
		return t.MemHeld
	}
	if t.Knobs["graphs"] == "true" {
		return 0 // peak allocated leaves out the graph's pool: plainly too low
	}
	return t.MemPeak
}

func checkMemoryHeadroom(c *evalContext) verdict {
	capacity := float64(c.run.gpuMemBytes())
	if capacity == 0 {
		return na("no GPU memory capacity in the manifest (CPU run)")
	}
	t := c.run.best
	if t == nil {
		return na("no completed trial")
	}
	held := t.memHeld()
	if held == 0 {
		if t.MemPeak > 0 {
			return na("the best trial %s recorded no reserved memory, and under CUDA graphs its peak allocated (%s) leaves out the graph's pool", t.ID, gib(float64(t.MemPeak)))
		}
		return na("the best trial %s recorded no memory", t.ID)
	}
	frac := float64(held) / capacity
	var others []string
	for _, o := range c.run.ok {
		if f := float64(o.memHeld()) / capacity; o != t && f > c.t("max_frac") {
			others = append(others, fmt.Sprintf("%s holds %s (%s)", o.label(), gib(float64(o.memHeld())), pct(f)))
		}
	}
	if frac <= c.t("max_frac") {
		msg := fmt.Sprintf("the best trial %s holds %s (reserved), %s of %s", t.ID, gib(float64(held)), pct(frac), gib(capacity))
		if len(others) > 0 {
			msg += fmt.Sprintf(" (%d other trial(s) above %s)", len(others), pct(c.t("max_frac")))
		}
		return pass("%s", msg)
	}
	return verdict{
		Status: Finding,
		Message: fmt.Sprintf("the best trial %s holds %s (reserved by the caching allocator, a CUDA graph's pool included), %s of the GPU's %s",
			t.ID, gib(float64(held)), pct(frac), gib(capacity)),
		Evidence: limit(others, 8),
		Trials:   ids(t),
		Recommendation: "keep headroom: a longer sequence or fragmentation will run out of memory; consider activation_checkpointing: true, " +
			"a smaller micro_batch with grad_accum, or PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
	}
}

// rankSpread is one repeat's per-rank median compute time and its spread.
type rankSpread struct {
	Trial  *trial
	Repeat int
	Spread float64
	Slow   int // slowest rank
	SlowMS float64
	FastMS float64
	GPU    string
}

func computeMS(s stepMetrics) float64 {
	if c := s.ForwardMS + s.BackwardMS + s.OptimizerMS; c > 0 {
		return c
	}
	return s.StepMS
}

func (t *trial) rankSpreads() []rankSpread {
	var out []rankSpread
	for _, rp := range t.okRepeats() {
		if len(rp.Ranks) < 2 {
			continue
		}
		meds := map[int]float64{}
		gpu := map[int]string{}
		for _, rk := range rp.Ranks {
			var xs []float64
			for _, s := range rk.Steps {
				xs = append(xs, computeMS(s))
			}
			if len(xs) > 0 {
				meds[rk.Rank] = median(xs)
				gpu[rk.Rank] = rk.GPU
			}
		}
		if len(meds) < 2 {
			continue
		}
		var all []float64
		rs := rankSpread{Trial: t, Repeat: rp.Repeat, Slow: -1, FastMS: math.Inf(1)}
		ranks := make([]int, 0, len(meds))
		for r := range meds {
			ranks = append(ranks, r)
		}
		sort.Ints(ranks)
		for _, r := range ranks {
			m := meds[r]
			all = append(all, m)
			if m > rs.SlowMS {
				rs.Slow, rs.SlowMS, rs.GPU = r, m, gpu[r]
			}
			rs.FastMS = math.Min(rs.FastMS, m)
		}
		if md := median(all); md > 0 {
			rs.Spread = (rs.SlowMS - rs.FastMS) / md
		}
		out = append(out, rs)
	}
	return out
}

func checkStraggler(c *evalContext) verdict {
	var spreads []rankSpread
	for _, t := range c.run.ok {
		if t.World > 1 && t.stages() == 1 {
			spreads = append(spreads, t.rankSpreads()...)
		}
	}
	if len(spreads) == 0 {
		return na("no completed multi-rank data-parallel trial with per-rank steps")
	}
	worst := spreads[0]
	slowCount := map[int]int{}
	over := 0
	for _, s := range spreads {
		if s.Spread > worst.Spread {
			worst = s
		}
		if s.Spread > c.t("max_spread") {
			over++
			slowCount[s.Slow]++
		}
	}
	if over == 0 {
		return pass("per-rank compute time differs by at most %s across %d repeat(s) of multi-rank trials", pct(worst.Spread), len(spreads))
	}
	where := "rank " + strconv.Itoa(worst.Slow)
	if worst.GPU != "" {
		where += " (GPU " + worst.GPU + ")"
	}
	return verdict{
		Status: Finding,
		Message: fmt.Sprintf("%s computed %s vs %s for the fastest rank (spread %s) in trial %s repeat %d; rank %d was slowest in %d of %d repeat(s) over %s",
			where, ms(worst.SlowMS), ms(worst.FastMS), pct(worst.Spread), worst.Trial.ID, worst.Repeat,
			worst.Slow, slowCount[worst.Slow], over, pct(c.t("max_spread"))),
		Trials: ids(worst.Trial),
		Recommendation: fmt.Sprintf("check %s: its clocks and throttle reasons (nvidia-smi -q -d PERFORMANCE), other processes on it, "+
			"its PCIe link and NUMA placement; a consistently slow rank sets every step's pace", where),
	}
}
