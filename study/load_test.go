package study

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// writeStudies writes files (path -> text) under dir/studies and returns that dir.
func writeStudies(t *testing.T, files map[string]string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "studies")
	for name, text := range files {
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	return root
}

const bertExample = `name: bert-large-tuning
description: What makes BERT-large pre-training fast on this machine?
model: {family: bert, preset: large, seq_len: 128, micro_batch: 32}
workload: {gpus: 8, procs_per_gpu: 1, warmup_steps: 10, steps: 50, repeats: 3, timeout: 10m}
baseline: {precision: bf16, graphs: false, ddp.bucket_mb: 25, nccl.algo: auto, nccl.proto: auto}
sweep:
  strategy: one-at-a-time
  knobs:
    precision: [fp32, tf32, bf16, fp16]
    ddp.bucket_mb: [1, 5, 25, 100]
    nccl.algo: [Ring, Tree]
    nccl.proto: [LL, LL128, Simple]
    graphs: [false, true]
objective: {metric: throughput, goal: max}
compare: {threshold: 5%}
`

func TestLoadIssueExample(t *testing.T) {
	dir := writeStudies(t, map[string]string{"bert.yaml": bertExample})
	s, err := Load(filepath.Join(dir, "bert.yaml"), LoadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "bert-large-tuning", s.Name)
	assert.Equal(t, Model{Family: "bert", Preset: "large"}, s.Model)
	assert.Equal(t, Workload{GPUs: 8, Nodes: 1, Ranks: 1, Device: "auto", WarmupSteps: 10, Steps: 50, WarmupSeconds: -1, MeasureSeconds: -1, Repeats: 3,
		MinRepeats: DefaultMinRepeats, MaxRepeats: DefaultMaxRepeats, Timeout: 10 * time.Minute, Seed: DefaultSeed,
		Interleave: true}, s.Workload)
	assert.Equal(t, map[string]string{"precision": "bf16", "graphs": "false", "ddp.bucket_mb": "25", "nccl.algo": "auto",
		"nccl.proto": "auto", "seq_len": "128", "micro_batch": "32", "procs_per_gpu": "1"}, s.Baseline)
	assert.Equal(t, []string{"precision", "ddp.bucket_mb", "nccl.algo", "nccl.proto", "graphs"}, s.Sweep.Order)
	assert.Equal(t, Objective{Metric: "throughput", Goal: "max"}, s.Objective)
	assert.InDelta(t, 0.05, s.Compare.Threshold, 1e-12)
	assert.Equal(t, 8, s.RanksFor(s.Baseline))
	assert.Equal(t, 16, s.RanksFor(map[string]string{"procs_per_gpu": "2"}))
	assert.Len(t, s.SHA256, 64)
}

// loadErr loads text as studies/<name> and returns the error text.
func loadErr(t *testing.T, files map[string]string, name string, opts LoadOptions) string {
	t.Helper()
	dir := writeStudies(t, files)
	_, err := Load(filepath.Join(dir, name), opts)
	require.Error(t, err)
	assert.Equal(t, exitcode.Input, exitcode.Of(err), "bad input exits 2")
	var se *Error
	require.ErrorAs(t, err, &se)
	return strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
}

func TestLoadErrors(t *testing.T) {
	const head = "name: x\nmodel: {family: bert, preset: tiny}\n"
	tests := []struct {
		name string
		text string
		want []string // each must appear
	}{
		{"unknown knob in sweep (issue example)", strings.Replace(bertExample, "    ddp.bucket_mb: [1, 5, 25, 100]", "    bucket_mbs: [1, 5, 25, 100]", 1),
			[]string{`bert.yaml:10:5: unknown key "bucket_mbs" in sweep (did you mean "ddp.bucket_mb"?)`}},
		{"unknown top-level key", head + "modle: {}\n", []string{`bert.yaml:3:1: unknown key "modle" in study (did you mean "model"?)`}},
		{"unknown workload key", head + "workload: {stepz: 5}\n", []string{`unknown key "stepz" in workload (did you mean "steps"?)`}},
		{"knob directly under sweep", head + "sweep: {strategy: grid, precision: [fp32]}\n", []string{`unknown key "precision" in sweep (knobs to sweep go under sweep.knobs)`}},
		{"unknown baseline knob", head + "baseline: {precison: bf16}\n", []string{`3:12: unknown key "precison" in baseline (did you mean "precision"?)`}},
		{"value outside domain", head + "baseline: {precision: bf61}\n", []string{`3:23: precision: "bf61" is not one of fp32 | tf32 | bf16 | fp16 | fp8 (did you mean "bf16"?)`}},
		{"wrong type: list for a value", head + "baseline: {graphs: [true]}\n", []string{`graphs: expected a single value, got a list`}},
		{"wrong type: steps", head + "workload: {steps: many}\n", []string{`3:19: workload.steps: expected an integer, got "many"`}},
		{"wrong type: section", head + "workload: 5\n", []string{`workload must be a mapping of keys, got an integer`}},
		{"sweep values not a list", head + "sweep: {strategy: grid, knobs: {precision: bf16}}\n", []string{`sweep.knobs.precision: expected a list of values, e.g. [fp32, tf32], got "bf16"`}},
		{"duplicate sweep value", head + "sweep: {strategy: grid, knobs: {precision: [bf16, BF16]}}\n", []string{`value bf16 is listed twice`}},
		{"duplicate key", head + "name: y\n", []string{`3:1: duplicate key "name" in study`}},
		{"bad strategy", head + "sweep: {strategy: grids, knobs: {precision: [bf16]}}\n", []string{`sweep.strategy: "grids" is not one of grid | one-at-a-time | list | greedy (did you mean "grid"?)`}},
		{"strategy missing", head + "sweep: {knobs: {precision: [bf16]}}\n", []string{`sweep.strategy is required`}},
		{"list without trials", head + "sweep: {strategy: list, knobs: {precision: [bf16]}}\n", []string{`strategy list needs sweep.trials`, `takes sweep.trials, not sweep.knobs`}},
		{"empty exclude entry", head + "sweep: {strategy: grid, knobs: {precision: [bf16]}, exclude: [{}]}\n", []string{`sweep.exclude[0] is empty`}},
		{"missing family", "name: x\nmodel: {preset: tiny}\n", []string{`model.family is required`}},
		{"bad family", "name: x\nmodel: {family: bart, preset: tiny}\n", []string{`model.family: "bart" is not one of gpt | bert | resnet50 (did you mean "bert"?)`}},
		{"bad preset", "name: x\nmodel: {family: gpt, preset: 125m}\n", []string{`model.preset: "125m" is not a gpt preset (tiny | 124m | 350m | 774m | 1.5b) (did you mean "124m"?)`}},
		{"missing name", "model: {family: gpt, preset: tiny}\n", []string{`name is required`}},
		{"unsafe name", "name: ../../etc\nmodel: {family: gpt, preset: tiny}\n", []string{`name "../../etc": use letters`}},
		{"knob of another family", head + "baseline: {channels_last: true}\n", []string{`baseline: channels_last applies to resnet50 models only, not bert`}},
		// resnet.fusion's family rule lives here, not in the planner's rules (knobs/rules.go fusionReason).
		{"resnet.fusion in another family's baseline", head + "baseline: {resnet.fusion: cudnn}\n", []string{`3:27: baseline: resnet.fusion applies to resnet50 models only, not bert`}},
		{"resnet.fusion in another family's sweep", head + "sweep: {strategy: grid, knobs: {resnet.fusion: [off, cudnn]}}\n", []string{`sweep: resnet.fusion applies to resnet50 models only, not bert`}},
		{"contradiction: gpus on cpu", head + "workload: {device: cpu, gpus: 2}\n", []string{`workload.gpus: 2 GPUs contradicts device cpu`}},
		{"contradiction: mps on cpu", head + "workload: {device: cpu}\nbaseline: {mps: true}\n", []string{`baseline mps: true contradicts device cpu`}},
		{"objective memory on cpu", head + "workload: {device: cpu}\nobjective: {metric: memory}\n", []string{`objective.metric: memory needs a GPU (workload.device is cpu`}},
		{"contradiction: ranks on cuda", head + "workload: {device: cuda, ranks: 4}\n", []string{`workload.ranks applies to device cpu`}},
		{"contradiction: model vs baseline", "name: x\nmodel: {family: bert, preset: tiny, micro_batch: 8}\nbaseline: {micro_batch: 16}\n", []string{`baseline micro_batch: 16 contradicts model.micro_batch: 8 at line 2`}},
		{"contradiction: goal", head + "objective: {metric: step_time, goal: max}\n", []string{`objective.goal: max contradicts objective.metric step_time, where lower is better`}},
		{"bad metric", head + "objective: {metric: thruput}\n", []string{`objective.metric: "thruput" is not a metric`}},
		{"bad timeout", head + "workload: {timeout: 10}\n", []string{`workload.timeout: "10" is not a duration (write e.g. 10m, 90s, 1h30m)`}},
		{"bad threshold", head + "compare: {threshold: 5}\n", []string{`compare.threshold: "5" reads as more than 100%; write 5% or 0.05`}},
		{"threshold of 100%", head + "compare: {threshold: 100%}\n", []string{`compare.threshold: 100% must be above 0% and below 100%`}},
		{"threshold of 1", head + "compare: {threshold: 1}\n", []string{`compare.threshold: 1 must be above 0% and below 100%`}},
		{"bad report format", head + "report: {formats: [html, pdf]}\n", []string{`report.formats: "pdf" is not one of html | md | json`}},
		{"bad device", head + "workload: {device: gpu}\n", []string{`workload.device: "gpu" is not one of auto | cuda | cpu`}},
		{"bad constraint syntax", head + "sweep: {strategy: grid, knobs: {precision: [bf16]}, constraints: ['precision = fp16']}\n", []string{`constraint "precision = fp16": unexpected character '='`}},
		{"constraint unknown knob", head + "sweep: {strategy: grid, knobs: {precision: [bf16]}, constraints: ['precison != fp16']}\n", []string{`neither "precison" nor "fp16" is a knob or a variable`, `(did you mean "precision"?)`}},
		{"constraint bad value", head + "sweep: {strategy: grid, knobs: {precision: [bf16]}, constraints: ['precision != fp61']}\n", []string{`precision: "fp61" is not one of`}},
		{"merge keys", head + "baseline:\n  <<: {precision: bf16}\n", []string{`merge keys (<<) are not supported`}},
		{"invalid yaml", head + "baseline: {precision: bf16\n", []string{`bert.yaml:`, `invalid YAML`}},
		{"empty file", "", []string{`empty file`}},
		{"two documents", head + "---\nname: y\n", []string{`more than one YAML document`}},
		{"not a mapping", "- a\n- b\n", []string{`study must be a mapping of keys, got a list`}},
		{"knob at the top level", head + "precision: bf16\n", []string{`unknown key "precision" in study (precision is a knob: set it under baseline or sweep it under sweep.knobs)`}},
		{"workload key in baseline", head + "baseline: {steps: 5}\n", []string{`unknown key "steps" in baseline (steps is a workload setting: put it under workload)`}},
		{"workload key in model", "name: x\nmodel: {family: bert, preset: tiny, repeats: 3}\n", []string{`unknown key "repeats" in model (repeats belongs under workload)`}},
		{"launcher key", head + "launcher: {partiton: gpu}\n", []string{`unknown key "partiton" in launcher (did you mean "partition"?)`}},
		{"repeats neither a number nor auto", head + "workload: {repeats: some}\n", []string{`3:21: workload.repeats: expected a number of launches (1..100) or auto, got "some"`}},
		{"repeats zero", head + "workload: {repeats: 0}\n", []string{`workload.repeats: 0 is outside 1..100`}},
		{"min_repeats with fixed repeats", head + "workload: {repeats: 3, min_repeats: 4}\n", []string{`3:37: workload.min_repeats applies to repeats: auto; with repeats: 3 every trial gets 3 launches`}},
		{"min above max", head + "workload: {repeats: auto, min_repeats: 8, max_repeats: 6}\n", []string{`3:56: workload.max_repeats: 6 is below min_repeats 8`}},
		{"min_repeats of one", head + "workload: {repeats: auto, min_repeats: 1}\n", []string{`workload.min_repeats: 1 is outside 2..1000`}},
		{"auto without interleaving", head + "workload: {repeats: auto, interleave: false}\n", []string{`workload.interleave: false contradicts repeats: auto`}},
		{"bad max_time", head + "workload: {max_time: soon}\n", []string{`workload.max_time: "soon" is not a duration`}},
		// audit C1: integer knobs have an upper bound, and the error says it
		{"grad_accum past its bound", head + "sweep: {strategy: grid, knobs: {grad_accum: [4294967297]}}\n",
			[]string{`bert.yaml:3:46: grad_accum: 4294967297 is above the maximum 4096 (integer 1..4096)`}},
		{"micro_batch past its bound", "name: x\nmodel: {family: bert, preset: tiny, micro_batch: 100000}\n",
			[]string{`bert.yaml:2:50: micro_batch: 100000 is above the maximum 65536 (integer 1..65536)`}},
		{"seq_len past its bound", head + "baseline: {seq_len: 2000000}\n", []string{`3:21: seq_len: 2000000 is above the maximum 1048576`}},
		{"knob integer beyond int64", head + "baseline: {grad_accum: 99999999999999999999}\n",
			[]string{`3:24: grad_accum: 99999999999999999999 is out of range (integer 1..4096)`}},
		// audit C3: messages that say what is wrong
		{"seed beyond int64", head + "workload: {seed: 99999999999999999999}\n",
			[]string{`3:18: workload.seed: 99999999999999999999 is out of range: expected an integer in 0..2147483647`}},
		{"seed beyond its range", head + "workload: {seed: 4294967296}\n", []string{`workload.seed: 4294967296 is outside 0..2147483647`}},
		{"steps beyond int64", head + "workload: {steps: -99999999999999999999}\n",
			[]string{`workload.steps: -99999999999999999999 is out of range: expected an integer in 1..1000000`}},
		{"NaN threshold", head + "checklist: {thresholds: {measurement-hygiene: {max_cv: .nan}}}\n",
			[]string{`3:56: checklist.thresholds.measurement-hygiene.max_cv: .nan is not a finite number: NaN and infinity are not allowed`}},
		{"infinite threshold", head + "checklist: {thresholds: {straggler: {max_spread: -.Inf}}}\n",
			[]string{`checklist.thresholds.straggler.max_spread: -.Inf is not a finite number: NaN and infinity are not allowed`}},
		{"threshold overflowing a float", head + "checklist: {thresholds: {straggler: {max_spread: 1e999}}}\n",
			[]string{`max_spread: 1e999 is not a finite number`}},
		{"NaN window", head + "workload: {measure_seconds: .NaN}\n", []string{`workload.measure_seconds: .NaN is not a finite number`}},
		{"tab before the first key", "\t" + head, []string{`bert.yaml:1:1: invalid YAML: found character that cannot start any token (YAML indents with spaces, not tabs: replace the tab with spaces)`}},
		{"tab after spaces on the first line", "  \tname: x\n", []string{`bert.yaml:1:3: invalid YAML: found character that cannot start any token (YAML indents`}},
		{"@ on the first line", "name: @x\n", []string{"bert.yaml:1:7: invalid YAML: found character that cannot start any token (quote a value that begins with @ or `)"}},
		{"unclosed quote on the first line", "name: 'x", []string{`bert.yaml:1:1: invalid YAML: found unexpected end of stream`}},
		{"tab on a later line", head + "\tbaseline: {}\n", []string{`bert.yaml:3:1: invalid YAML: found character that cannot start any token (YAML indents with spaces, not tabs`}},
		{"tab indenting a later line", "name: x\n\tmodel: {}\n", []string{`bert.yaml:2:1: invalid YAML: found a tab character that violates indentation (YAML indents with spaces`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := loadErr(t, map[string]string{"bert.yaml": tt.text}, "bert.yaml", LoadOptions{})
			for _, w := range tt.want {
				assert.Contains(t, got, w)
			}
		})
	}
}

func TestLoadRepeatsAuto(t *testing.T) {
	head := "name: x\nmodel: {family: gpt, preset: tiny}\n"
	dir := writeStudies(t, map[string]string{
		"auto.yaml":   head + "workload: {repeats: auto, max_repeats: 12, max_time: 9m}\n",
		"child.yaml":  "name: y\nextends: auto.yaml\nworkload: {repeats: 3}\n",
		"serial.yaml": head + "workload: {repeats: 2, interleave: false}\n",
	})
	s, err := Load(filepath.Join(dir, "auto.yaml"), LoadOptions{})
	require.NoError(t, err)
	assert.Equal(t, 0, s.Workload.Repeats, "0 is auto")
	assert.Equal(t, DefaultMinRepeats, s.Workload.MinRepeats)
	assert.Equal(t, 12, s.Workload.MaxRepeats)
	assert.Equal(t, 9*time.Minute, s.Workload.MaxTime)
	assert.True(t, s.Workload.Interleave)
	// a child that fixes the repeats keeps the parent's budget; its min/max no longer apply
	c, err := Load(filepath.Join(dir, "child.yaml"), LoadOptions{})
	require.NoError(t, err)
	assert.Equal(t, 3, c.Workload.Repeats)
	assert.Equal(t, 9*time.Minute, c.Workload.MaxTime)
	sr, err := Load(filepath.Join(dir, "serial.yaml"), LoadOptions{})
	require.NoError(t, err)
	assert.False(t, sr.Workload.Interleave)
}

func TestLoadReportsAllProblemsAtOnce(t *testing.T) {
	text := `name: x
model: {family: bert, preset: huge}
workload: {stepz: 5, repeats: zero}
baseline: {precison: bf16, graphs: perhaps}
sweep:
  strategy: grid
  knobs:
    nccl.algo: [Ring, Rung]
`
	got := loadErr(t, map[string]string{"a.yaml": text}, "a.yaml", LoadOptions{})
	lines := strings.Split(got, "\n")
	assert.Equal(t, []string{
		`a.yaml:2:31: model.preset: "huge" is not a bert preset (tiny | base | large)`,
		`a.yaml:3:12: unknown key "stepz" in workload (did you mean "steps"?)`,
		`a.yaml:3:31: workload.repeats: expected a number of launches (1..100) or auto, got "zero"`,
		`a.yaml:4:12: unknown key "precison" in baseline (did you mean "precision"?)`,
		`a.yaml:4:36: graphs: "perhaps" is not a boolean (true | false)`,
		`a.yaml:8:23: nccl.algo: "Rung" is not one of Ring | Tree | CollnetDirect | CollnetChain | NVLS | NVLSTree | PAT | auto | default (did you mean "Ring"?)`,
	}, lines)
}

func TestLoadHostileInput(t *testing.T) {
	t.Run("billion laughs", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("name: x\nmodel: {family: gpt, preset: tiny}\n")
		b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
		for i := 1; i < 10; i++ {
			b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
			for j := 0; j < 10; j++ {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString("*a" + string(rune('0'+i-1)))
			}
			b.WriteString("]\n")
		}
		start := time.Now()
		got := loadErr(t, map[string]string{"bomb.yaml": b.String()}, "bomb.yaml", LoadOptions{})
		assert.Contains(t, got, "alias bomb")
		assert.Less(t, time.Since(start), 2*time.Second)
	})
	t.Run("too many nodes", func(t *testing.T) {
		text := "name: x\nmodel: {family: gpt, preset: tiny}\ndescription: [" + strings.Repeat("a, ", 120000) + "a]\n"
		got := loadErr(t, map[string]string{"n.yaml": text}, "n.yaml", LoadOptions{MaxBytes: 1 << 20})
		assert.Contains(t, got, "more than 100000 YAML nodes; a study is far smaller")
	})
	t.Run("recursive alias", func(t *testing.T) {
		got := loadErr(t, map[string]string{"r.yaml": "name: x\nmodel: {family: gpt, preset: tiny}\nbaseline: &b {x: *b}\n"}, "r.yaml", LoadOptions{})
		assert.NotEmpty(t, got)
	})
	t.Run("deep nesting", func(t *testing.T) {
		text := "name: x\nmodel: {family: gpt, preset: tiny}\nbaseline: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n"
		got := loadErr(t, map[string]string{"deep.yaml": text}, "deep.yaml", LoadOptions{})
		assert.Regexp(t, "nesting deeper than|max depth|exceeded", got)
	})
	t.Run("deep block nesting", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("name: x\nmodel: {family: gpt, preset: tiny}\nbaseline:\n")
		for i := 1; i < 60; i++ {
			b.WriteString(strings.Repeat(" ", i) + "k:\n")
		}
		got := loadErr(t, map[string]string{"deep.yaml": b.String()}, "deep.yaml", LoadOptions{})
		assert.Contains(t, got, "nesting deeper than 32 levels")
	})
	t.Run("size cap before parsing", func(t *testing.T) {
		text := "name: x\nmodel: {family: gpt, preset: tiny}\ndescription: " + strings.Repeat("y", 4096) + "\n"
		got := loadErr(t, map[string]string{"big.yaml": text}, "big.yaml", LoadOptions{MaxBytes: 1024})
		assert.Contains(t, got, "big.yaml: larger than the 1024-byte limit")
	})
	t.Run("aliases within limits are fine", func(t *testing.T) {
		dir := writeStudies(t, map[string]string{"ok.yaml": "name: x\nmodel: {family: gpt, preset: tiny}\nbaseline: &b {precision: bf16}\nsweep: {strategy: list, trials: [*b, {precision: fp32}]}\n"})
		s, err := Load(filepath.Join(dir, "ok.yaml"), LoadOptions{})
		require.NoError(t, err)
		assert.Equal(t, []map[string]string{{"precision": "bf16"}, {"precision": "fp32"}}, s.Sweep.Trials)
	})
}

func TestExtends(t *testing.T) {
	parent := `name: bert
model: {family: bert, preset: large, micro_batch: 32}
workload: {device: cuda, gpus: 8, steps: 40}
baseline: {precision: bf16, ddp.bucket_mb: 25}
sweep: {strategy: grid, knobs: {precision: [fp32, bf16]}}
checklist: {thresholds: {straggler: {spread: 0.1, min: 2}}}
`
	child := `name: bert-nccl
extends: ../bert.yaml
model: {preset: base}
workload: {steps: 20}
baseline: {nccl.proto: Simple}
sweep: {strategy: one-at-a-time, knobs: {nccl.algo: [Ring, Tree]}}
checklist: {thresholds: {straggler: {spread: 0.2}}}
`
	dir := writeStudies(t, map[string]string{"bert.yaml": parent, "bert/nccl.yaml": child})
	s, err := Load(filepath.Join(dir, "bert", "nccl.yaml"), LoadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "bert-nccl", s.Name)
	assert.Equal(t, "../bert.yaml", s.Extends)
	assert.Equal(t, Model{Family: "bert", Preset: "base"}, s.Model)
	assert.Equal(t, 20, s.Workload.Steps)
	assert.Equal(t, 8, s.Workload.GPUs)
	assert.Equal(t, map[string]string{"micro_batch": "32", "precision": "bf16", "ddp.bucket_mb": "25", "nccl.proto": "Simple"}, s.Baseline)
	assert.Equal(t, "one-at-a-time", s.Sweep.Strategy, "a child's sweep replaces the parent's")
	assert.Equal(t, []string{"nccl.algo"}, s.Sweep.Order)
	assert.Equal(t, map[string]float64{"spread": 0.2, "min": 2}, s.Checklist.Thresholds["straggler"])
	require.Len(t, s.Sources, 2)
	assert.Equal(t, child, string(s.Text))
}

func TestExtendsRefusals(t *testing.T) {
	const body = "model: {family: gpt, preset: tiny}\n"
	t.Run("cycle", func(t *testing.T) {
		got := loadErr(t, map[string]string{
			"a.yaml": "name: a\nextends: b.yaml\n" + body,
			"b.yaml": "name: b\nextends: a.yaml\n" + body,
		}, "a.yaml", LoadOptions{})
		assert.Contains(t, got, "b.yaml:2:10: extends cycle: ")
	})
	t.Run("self", func(t *testing.T) {
		got := loadErr(t, map[string]string{"a.yaml": "name: a\nextends: a.yaml\n" + body}, "a.yaml", LoadOptions{})
		assert.Contains(t, got, "extends cycle")
	})
	t.Run("missing parent", func(t *testing.T) {
		got := loadErr(t, map[string]string{"a.yaml": "name: a\nextends: nope.yaml\n" + body}, "a.yaml", LoadOptions{})
		assert.Contains(t, got, `a.yaml:2:10: extends "`)
		assert.Contains(t, got, "no such file or directory")
	})
	t.Run("parent problems name the parent", func(t *testing.T) {
		got := loadErr(t, map[string]string{
			"p.yaml":   "name: p\n" + body + "baseline: {precision: fp4}\n",
			"g/c.yaml": "name: c\nextends: ../p.yaml\n",
		}, "g/c.yaml", LoadOptions{})
		assert.Contains(t, got, `p.yaml:3:23: precision: "fp4" is not one of`)
	})

	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "evil.yaml"), []byte("name: evil\n"+body), 0o644))
	for _, ext := range []string{"../../" + filepath.Base(outside) + "/evil.yaml", filepath.Join(outside, "evil.yaml")} {
		t.Run("outside "+ext, func(t *testing.T) {
			dir := writeStudies(t, map[string]string{"a.yaml": "name: a\nextends: " + ext + "\n"})
			// Relative paths: place the outside dir next to the studies tree.
			if !filepath.IsAbs(ext) {
				sib := filepath.Join(filepath.Dir(dir), "..", filepath.Base(outside))
				require.NoError(t, os.MkdirAll(sib, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(sib, "evil.yaml"), []byte("name: evil\n"+body), 0o644))
			}
			_, err := Load(filepath.Join(dir, "a.yaml"), LoadOptions{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "outside the studies tree")
			assert.Contains(t, err.Error(), "--allow-outside")
			s, err := Load(filepath.Join(dir, "a.yaml"), LoadOptions{AllowOutside: true})
			require.NoError(t, err)
			assert.Equal(t, "gpt", s.Model.Family)
		})
	}
	t.Run("symlink escaping the tree", func(t *testing.T) {
		dir := writeStudies(t, map[string]string{"a.yaml": "name: a\nextends: link.yaml\n"})
		require.NoError(t, os.Symlink(filepath.Join(outside, "evil.yaml"), filepath.Join(dir, "link.yaml")))
		_, err := Load(filepath.Join(dir, "a.yaml"), LoadOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "outside the studies tree")
	})
}
