package checklist

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

var update = flag.Bool("update", false, "rewrite docs/checklist.md from the registry")

func TestDocsUpToDate(t *testing.T) {
	path := filepath.Join("..", "docs", "checklist.md")
	want := Markdown()
	if *update {
		require.NoError(t, os.WriteFile(path, want, 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run `go test ./checklist -run TestDocsUpToDate -update` (or go generate ./checklist)", path)
	}
}

func TestRegistry(t *testing.T) {
	required := []string{"precision", "fp16-overflow", "cuda-graphs",
		"profile-launch-bound", "profile-normalisation", "profile-elementwise", "profile-exposed-comm", "bucket-size", "exposed-comm", "overlap-disabled",
		"nccl-forced", "nccl-forced-ignored", "busbw-vs-link", "topology", "nccl-transport-fallback", "pipeline-bubble", "pipeline-schedule-memory", "zero-memory-not-time", "zero-gather-overlap-off", "tp-memory-not-time", "tp-across-nodes", "tp-sequence-parallel-small-degree", "mps",
		"memory-headroom", "straggler", "measurement-hygiene", "no-effect-knob", "failed-trials", "untrusted-launches"}
	var got []string
	id := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	for _, r := range Rules() {
		got = append(got, r.ID)
		assert.Regexp(t, id, r.ID)
		assert.NotEmpty(t, r.Title, r.ID)
		assert.NotEmpty(t, r.Rationale, r.ID)
		assert.NotEmpty(t, r.Needs, r.ID)
		assert.True(t, r.Chapter >= 1 && r.Chapter <= 30, r.ID)
		assert.GreaterOrEqual(t, SeverityRank(r.Severity), 0, r.ID)
		require.NotNil(t, r.check, r.ID)
		for _, th := range r.Thresholds {
			assert.NotEmpty(t, th.Doc, r.ID+"."+th.Name)
		}
	}
	assert.ElementsMatch(t, required, got)
}

func TestEvaluateEveryRuleInOrder(t *testing.T) {
	run := mkRun([]spec{{id: "a", thr: 100, stepMS: 10}})
	res := Evaluate(run, Config{})
	require.Len(t, res, len(Rules()))
	for i, r := range Rules() {
		assert.Equal(t, r.ID, res[i].RuleID)
		assert.Contains(t, []Status{Pass, Finding, NotApplicable}, res[i].Status)
		assert.NotEmpty(t, res[i].Message, r.ID)
	}
	// nil and empty runs give a verdict for every rule, never a panic.
	for _, run := range []*store.Run{nil, mkRun(nil)} {
		res := Evaluate(run, Config{})
		require.Len(t, res, len(Rules()))
	}
}

func TestConfigDisableAndThresholds(t *testing.T) {
	run := mkRun([]spec{{id: "a", thr: 100, stepMS: 10}})
	cfg := Config{Disable: []string{"measurement-hygiene"},
		Thresholds: map[string]map[string]float64{"precision": {"min_speedup": 1.5}}}
	require.NoError(t, cfg.Validate())
	for _, r := range Evaluate(run, cfg) {
		switch r.RuleID {
		case "measurement-hygiene":
			assert.Equal(t, NotApplicable, r.Status)
			assert.Contains(t, r.Message, "disabled")
		case "precision":
			assert.Equal(t, 1.5, r.Thresholds["min_speedup"])
			assert.Equal(t, 0.02, r.Thresholds["loss_tolerance"])
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		description string
		cfg         Config
		errs        []string
	}{
		{"unknown disabled rule with a suggestion", Config{Disable: []string{"precison"}}, []string{`unknown rule "precison"`, `did you mean "precision"`}},
		{"unknown rule in thresholds", Config{Thresholds: map[string]map[string]float64{"nope": {"x": 1}}}, []string{`checklist.thresholds: unknown rule "nope"`}},
		{"unknown threshold lists the valid ones", Config{Thresholds: map[string]map[string]float64{"precision": {"speedup": 1}}},
			[]string{`checklist.thresholds.precision: unknown threshold "speedup"`, "min_speedup, loss_tolerance"}},
		{"rule without thresholds", Config{Thresholds: map[string]map[string]float64{"topology": {"x": 1}}}, []string{"rule topology has no thresholds"}},
		// audit C2: values are checked against the range the rule can use
		{"negative fraction", th("measurement-hygiene", "max_cv", -3),
			[]string{"checklist.thresholds.measurement-hygiene.max_cv: -3 is outside (0, 1): max_cv takes a fraction in (0, 1), e.g. its default 0.05"}},
		{"fraction of 1", th("memory-headroom", "max_frac", 1), []string{"memory-headroom.max_frac: 1 is outside (0, 1)"}},
		{"negative count", th("measurement-hygiene", "min_steps", -1),
			[]string{"measurement-hygiene.min_steps: -1 is outside 1..1000000: min_steps takes a number of steps in 1..1000000"}},
		{"zero count", th("measurement-hygiene", "min_repeats", 0), []string{"min_repeats: 0 is outside 1..1000"}},
		{"fractional count", th("measurement-hygiene", "min_steps", 2.5), []string{"min_steps: 2.5 is not a whole number"}},
		{"negative warm-up floor", th("measurement-hygiene", "min_warmup_steps", -1), []string{"min_warmup_steps: -1 is outside 0..100000"}},
		{"speed-up below 1", th("precision", "min_speedup", 0.5), []string{"precision.min_speedup: 0.5 is outside [1, 100]: min_speedup takes a speed-up ratio"}},
		{"zero milliseconds", th("cuda-graphs", "small_step_ms", 0), []string{"cuda-graphs.small_step_ms: 0 is outside (0, 3600000]"}},
		{"negative link bandwidth", th("busbw-vs-link", "link_gbs", -1), []string{"busbw-vs-link.link_gbs: -1 is outside [0, 100000]"}},
		{"NaN", th("measurement-hygiene", "max_cv", math.NaN()), []string{"max_cv: NaN is not a finite number: NaN and infinity are not allowed"}},
		{"infinity", th("straggler", "max_spread", math.Inf(1)), []string{"max_spread: +Inf is not a finite number"}},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			err := tt.cfg.Validate()
			require.Error(t, err)
			for _, e := range tt.errs {
				assert.Contains(t, err.Error(), e)
			}
		})
	}
}

// th is a Config overriding one threshold.
func th(rule, name string, v float64) Config {
	return Config{Thresholds: map[string]map[string]float64{rule: {name: v}}}
}

// TestThresholdBounds (audit C2): every threshold has a range, its default is
// in it, and the edges of each range are accepted or refused as documented.
func TestThresholdBounds(t *testing.T) {
	for _, r := range Rules() {
		for _, tt := range r.Thresholds {
			b, ok := r.boundOf(tt)
			if !assert.True(t, ok, "%s.%s: unit %q has no range in bounds.go", r.ID, tt.Name, tt.Unit) {
				continue
			}
			assert.Empty(t, b.check(tt.Default), "%s.%s: the default is outside its own range", r.ID, tt.Name)
			assert.NoError(t, th(r.ID, tt.Name, tt.Default).Validate(), "%s.%s", r.ID, tt.Name)
			assert.NotEmpty(t, b.What, "%s.%s", r.ID, tt.Name)
			assert.Equal(t, !b.MinOpen, b.check(b.Min) == "", "%s.%s at its minimum %v", r.ID, tt.Name, b.Min)
			assert.Equal(t, !b.MaxOpen, b.check(b.Max) == "", "%s.%s at its maximum %v", r.ID, tt.Name, b.Max)
			assert.NotEmpty(t, b.check(b.Max+1), "%s.%s above its maximum", r.ID, tt.Name)
		}
	}
	// in range: no problem
	require.NoError(t, Config{Thresholds: map[string]map[string]float64{
		"measurement-hygiene": {"max_cv": 0.1, "min_steps": 5, "min_repeats": 2, "min_warmup_steps": 0},
		"busbw-vs-link":       {"link_gbs": 0},
		"precision":           {"min_speedup": 1},
	}}.Validate())
	// each problem names the rule and the threshold, for the caller to place
	ps := Config{Thresholds: map[string]map[string]float64{"measurement-hygiene": {"max_cv": -3, "min_steps": -1}}}.Problems()
	require.Len(t, ps, 2)
	assert.Equal(t, []string{"max_cv", "min_steps"}, []string{ps[0].Threshold, ps[1].Threshold})
	assert.Equal(t, "measurement-hygiene", ps[0].Rule)
}

func TestWriteText(t *testing.T) {
	run := mkRun([]spec{{id: "a1b2", thr: 100, stepMS: 80, loss: 5}, {id: "c3d4", set: set("precision", "bf16"), thr: 190, stepMS: 42, loss: 5.01}})
	var b bytes.Buffer
	require.NoError(t, WriteText(&b, "checklist of run", Evaluate(run, Config{})))
	out := b.String()
	assert.Contains(t, out, "FINDINGS")
	assert.Contains(t, out, "WARNING  precision  (ch 23)")
	assert.Contains(t, out, "→ use precision: bf16")
	assert.Less(t, strings.Index(out, "FINDINGS"), strings.Index(out, "PASS"))
	assert.Less(t, strings.Index(out, "PASS"), strings.Index(out, "NOT APPLICABLE"))
	b.Reset()
	require.NoError(t, WriteRules(&b))
	assert.Contains(t, b.String(), "min_speedup=1.1")
}

func TestBaselineFallback(t *testing.T) {
	run := mkRun([]spec{{id: "eager", thr: 100, stepMS: 10}, {id: "graph", set: set("graphs", "true"), thr: 125, stepMS: 8}},
		onGPUs(1, "NVIDIA H200", 141<<30, 0, ""), func(m *store.Manifest) { m.Baseline = map[string]string{"precision": "fp32"} })
	v := newRunView(run)
	assert.Equal(t, "false", v.baseline("graphs"), "from the baseline trial")
	run.Trials[0].Changed = []string{"x"}
	v = newRunView(run)
	assert.Equal(t, "25", v.baseline("ddp.bucket_mb"), "from the knob registry")
	assert.Equal(t, Finding, evalOne(t, run, "cuda-graphs", Config{}).Status)
}

// TestEvaluateNeverPanics feeds every rule odd runs: failed trials without
// repeats, summaries without steps, steps without summaries, NaN losses,
// empty knobs.
func TestEvaluateNeverPanics(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	outcomes := []store.Outcome{store.OK, store.OK, store.OK, store.Failed, store.OOM, store.Timeout, store.Unsupported}
	values := map[string][]string{"precision": {"fp32", "bf16", "fp16"}, "graphs": {"false", "true"}, "ddp.bucket_mb": {"1", "25", "100"},
		"nccl.algo": {"auto", "Ring"}, "pipeline.stages": {"1", "2"}, "pipeline.schedule": {"gpipe", "1f1b"}, "mps": {"false", "true"}}
	names := sortedKeys(values)
	for i := 0; i < 200; i++ {
		var specs []spec
		for j := 0; j < 1+rng.IntN(6); j++ {
			kv := []string{}
			for _, k := range names {
				if rng.IntN(3) == 0 {
					kv = append(kv, k, values[k][rng.IntN(len(values[k]))])
				}
			}
			sp := spec{id: fmt.Sprintf("t%d", j), set: set(kv...), outcome: outcomes[rng.IntN(len(outcomes))],
				thr: float64(rng.IntN(3)) * 50, stepMS: float64(rng.IntN(3)) * 10, loss: []float64{0, 5, math.NaN()}[rng.IntN(3)],
				ranks: 1 + rng.IntN(4), mfu: rng.Float64() / 2, mem: int64(rng.IntN(100)) << 30, noise: rng.Float64() / 10,
				steps: rng.IntN(4)}
			if rng.IntN(2) == 0 {
				sp.step = dpSteps(rng.IntN(5), int64(rng.IntN(64))<<20, rng.Float64()*400, 10, 5)
			}
			specs = append(specs, sp)
		}
		var opts []func(*store.Manifest)
		if rng.IntN(2) == 0 {
			opts = append(opts, onGPUs(4, "NVIDIA H100", 80<<30, 18, topoBridged))
		}
		run := mkRun(specs, opts...)
		if rng.IntN(4) == 0 {
			for k := range run.Trials {
				run.Trials[k].Summary = nil
			}
		}
		res := Evaluate(run, Config{})
		require.Len(t, res, len(Rules()))
		for _, r := range res {
			require.Contains(t, []Status{Pass, Finding, NotApplicable}, r.Status, "%s: %s", r.RuleID, r.Message)
			require.NotEmpty(t, r.Message, r.RuleID)
			require.NotContains(t, r.Message, "NaN", r.RuleID)
			require.NotContains(t, r.Message, "%!", r.RuleID)
		}
	}
}
