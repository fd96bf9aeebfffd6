package checklist

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

func TestMeasurementHygiene(t *testing.T) {
	good := []spec{{id: "a", thr: 100, stepMS: 10, noise: 0.01}, {id: "b", set: set("graphs", "true"), thr: 100, stepMS: 10, noise: 0.01}}
	workload := func(w, s, r float64) func(*store.Manifest) {
		return func(m *store.Manifest) {
			m.Workload = map[string]any{"warmup_steps": w, "steps": s, "repeats": r}
		}
	}
	throttled := mkRun(good)
	throttled.Trials[1].Repeats[0].GPUSamples = []store.GPUSample{{T: 1, Throttles: 0x40}} // SW thermal slowdown
	flagged := mkRun(good)
	flagged.Trials[0].Throttled = true
	runCases(t, "measurement-hygiene", []ruleCase{
		{name: "clean", status: Pass, run: mkRun(good), contains: []string{"5 warm-up, 20 measured steps, 3 repeats"}},
		{name: "smoke-sized workload", status: Finding, run: mkRun(good, workload(1, 5, 1)),
			contains: []string{"1 warm-up step(s)", "5 measured step(s)", "1 repeat(s)", "workload.steps: 20"}},
		{name: "noisy trial", status: Finding,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 10, noise: 0.12}, good[1]}),
			contains: []string{"1 of 2 completed trial(s) are noisy: a (repeat CV 12.0%)", "workload.interleave: true spreads drift"}, trials: []string{"a"}},
		{name: "noisy trial, interleave on already: no advice to turn it on", status: Finding,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 10, noise: 0.12}, good[1]}, func(m *store.Manifest) { m.Workload["interleave"] = true }),
			contains: []string{"interleave is on already", "Every launch, step by step"}, trials: []string{"a"}},
		{name: "throttle reasons in GPU samples", status: Finding, run: throttled, contains: []string{"throttled: b"}},
		{name: "throttled flag", status: Finding, run: flagged, contains: []string{"throttled: a"}},
		{name: "thresholds lowered for a smoke study", status: Pass, run: mkRun(good, workload(1, 5, 1)),
			cfg: Config{Thresholds: map[string]map[string]float64{"measurement-hygiene": {"min_warmup_steps": 1, "min_steps": 5, "min_repeats": 1}}}},
		{name: "workload missing: read from the records", status: Finding,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 10, steps: 4}}, func(m *store.Manifest) { m.Workload = nil }),
			contains: []string{"4 measured step(s)"}},
		{name: "no trials", status: NotApplicable, run: mkRun(nil)},
	})
}

func TestNoEffectKnob(t *testing.T) {
	runCases(t, "no-effect-knob", []ruleCase{
		{name: "decided no difference", status: Finding, severity: Info,
			run: mkRun([]spec{{id: "a", thr: 100, stepMS: 10, noise: 0.01}, {id: "b", set: set("nccl.algo", "Ring"), thr: 101, stepMS: 9.9, noise: 0.01}}),
			contains: []string{"1 knob(s) had no effect larger than 5%: nccl.algo", "0.99× [", "within ±5%",
				"3 vs 3 launches"}, trials: []string{"a", "b"}},
		{name: "undecided is not no effect", status: Pass,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 10, noise: 0.05}, {id: "b", set: set("graphs", "true"), thr: 108, stepMS: 9.3, noise: 0.04}}),
			contains: []string{"no swept knob (graphs)"}},
		{name: "real effect", status: Pass,
			run: mkRun([]spec{{id: "a", thr: 100, stepMS: 10, noise: 0.01}, {id: "b", set: set("graphs", "true"), thr: 120, stepMS: 8.3, noise: 0.01}})},
		{name: "a small measurable difference is no effect larger than δ", status: Finding,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 10, noise: 0.001}, {id: "b", set: set("graphs", "true"), thr: 101, stepMS: 9.9, noise: 0.001}}),
			contains: []string{"had no effect larger than 5%: graphs", "within ±5% (measurably slower, −"}},
		{name: "a wider study threshold", status: Finding,
			run: mkRun([]spec{{id: "a", thr: 100, stepMS: 10, noise: 0.05}, {id: "b", set: set("graphs", "true"), thr: 108, stepMS: 9.3, noise: 0.04}},
				func(m *store.Manifest) { m.CompareThreshold = 0.5 }),
			contains: []string{"no effect larger than 50%"}},
		// The H100 ResNet-50 run: the baseline captures graphs (away from the
		// registry's default false) and eager is measurably 3.5-4.8% slower,
		// inside ±5%: keep the faster value, never "leave it at its default".
		{name: "keep the measurably faster value, not the default", status: Finding,
			run: mkRun([]spec{{id: "a", set: set("graphs", "true"), thr: 6026, stepMS: 21.2, noise: 0.002},
				{id: "b", set: set("graphs", "false"), thr: 5785, stepMS: 22.1, noise: 0.002}}, withBaseline("graphs", "true")),
			contains: []string{"graphs: keep true, measurably faster (+", "than false", "speed-up larger than 5%"},
			absent:   []string{"default"}},
		{name: "the measurably faster value against the baseline's", status: Finding,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 10, noise: 0.001}, {id: "b", set: set("nccl.algo", "Ring"), thr: 102, stepMS: 9.8, noise: 0.001}}),
			contains: []string{"nccl.algo: keep Ring, measurably faster (+", "than auto"}, absent: []string{"default"}},
		{name: "neither measurably faster", status: Finding,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 10, noise: 0.01}, {id: "b", set: set("nccl.algo", "Ring"), thr: 100.2, stepMS: 9.98, noise: 0.01}}),
			contains: []string{"nccl.algo: no value was measurably faster, every pair is within ±5%"}, absent: []string{"default", "keep"}},
		{name: "no clean pair", status: NotApplicable,
			run: mkRun([]spec{{id: "a", thr: 100, stepMS: 10}, {id: "b", set: set("graphs", "true", "precision", "bf16"), thr: 150, stepMS: 7}})},
	})
}

func TestFailedTrials(t *testing.T) {
	best := spec{id: "best", thr: 100, stepMS: 10}
	runCases(t, "failed-trials", []ruleCase{
		{name: "OOM in a direction that helps", status: Finding,
			run: mkRun([]spec{best, {id: "bf16mb32", set: set("precision", "bf16", "micro_batch", "32"), outcome: store.OOM,
				err: "CUDA out of memory. Tried to allocate 2.00 GiB\nmore"}}),
			contains: []string{"bf16mb32 ended oom (CUDA out of memory. Tried to allocate 2.00 GiB)", "micro_batch: 8→32", "precision: fp32→bf16", "activation_checkpointing: true"},
			trials:   []string{"bf16mb32", "best"}},
		{name: "timeout with graphs", status: Finding,
			run:      mkRun([]spec{best, {id: "g", set: set("graphs", "true"), outcome: store.Timeout}}),
			contains: []string{"graphs: false→true", "workload.timeout"}},
		{name: "failure in an unpromising direction", status: Pass,
			run:      mkRun([]spec{best, {id: "small", set: set("micro_batch", "2"), outcome: store.Failed, err: "boom"}}),
			contains: []string{"1 trial(s) ended badly, none"}},
		{name: "unsupported is not a failure", status: Pass,
			run: mkRun([]spec{best, {id: "g", set: set("graphs", "true"), outcome: store.Unsupported}})},
		{name: "nothing completed", status: Finding, severity: Error,
			run:      mkRun([]spec{{id: "x", outcome: store.Crashed, err: "rank 1 killed by SIGSEGV"}}),
			contains: []string{"no trial completed", "SIGSEGV"}},
		// Planned trials without a record never ran: the run did not measure
		// its plan, an error whatever their knobs (audit: 0 findings before).
		{name: "planned trials never ran", status: Finding, severity: Error,
			run: withPlan(mkRun([]spec{best, {id: "mb4", set: set("micro_batch", "4"), thr: 90, stepMS: 11}}),
				spec{id: "late", set: set("micro_batch", "2")}, spec{id: "later", set: set("precision", "bf16")}),
			contains: []string{"2 of 4 planned trial(s) never ran (no record in trials.jsonl), e.g. late (micro_batch=2)",
				"the best trial best is the best of the 2 measured", "later (precision=bf16) was planned and never ran",
				"casestudy run --resume"},
			trials: []string{"late", "later"}},
		{name: "planned, not one record (the audit's aa run)", status: Finding, severity: Error,
			run:      withPlan(mkRun(nil), best, spec{id: "fault", set: set("micro_batch", "4")}),
			contains: []string{"no trial completed; 2 of 2 planned trial(s) never ran", "best (baseline) was planned and never ran"},
			trials:   []string{"best", "fault"}},
		{name: "counts leave the dropped combinations out", status: Pass,
			run: withPlan(mkRun([]spec{best, {id: "mb4", set: set("micro_batch", "4"), thr: 90, stepMS: 11},
				{id: "skipped-1", set: set("mps", "true"), outcome: store.Skipped}, {id: "skipped-2", set: set("mps", "true", "micro_batch", "4"), outcome: store.Skipped}})),
			contains: []string{"(2 of 2 planned trial(s) measured; 2 combination(s) dropped before running, not counted)"},
			absent:   []string{"4 trials"}},
		{name: "no trials: nothing measured is an error", status: Finding, severity: Error, run: mkRun(nil),
			contains: []string{"measured nothing"}},
	})
}

// A 1% difference inside the 2% noise floor still counts as an effect when the
// TestNoEffectNeedsLaunches: one launch per trial gives no verdict, so the
// rule claims nothing however steady or noisy the steps were (steps are not
// replicates).
func TestNoEffectNeedsLaunches(t *testing.T) {
	for _, spread := range []float64{0.0001, 0.05} {
		steps := func(base float64) func(int, int, *engine.StepMetrics) {
			return func(_, i int, s *engine.StepMetrics) {
				s.StepMS = base * (1 + spread*float64(i%5-2))
				s.Samples = 8
			}
		}
		run := mkRun([]spec{{id: "a", thr: 100, stepMS: 10, step: steps(10)},
			{id: "b", set: set("graphs", "true"), thr: 100.2, stepMS: 9.98, step: steps(9.98)}})
		for i := range run.Trials {
			run.Trials[i].Repeats = run.Trials[i].Repeats[:1]
			run.Trials[i].Summary = nil
		}
		res := evalOne(t, run, "no-effect-knob", Config{})
		require.Equal(t, Pass, res.Status, res.Message)
	}
}
