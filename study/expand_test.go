package study

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
)

func loadText(t *testing.T, text string) *Study {
	t.Helper()
	dir := writeStudies(t, map[string]string{"s.yaml": text})
	s, err := Load(filepath.Join(dir, "s.yaml"), LoadOptions{})
	require.NoError(t, err)
	return s
}

func expandText(t *testing.T, text string, opts ExpandOptions) *Plan {
	t.Helper()
	p, err := Expand(loadText(t, text), opts)
	require.NoError(t, err)
	return p
}

func changedSets(p *Plan) []string {
	var out []string
	for _, t := range p.Trials {
		out = append(out, FormatKnobs(t.Knobs, t.Changed))
	}
	return out
}

func reasons(p *Plan) []string {
	var out []string
	for _, d := range p.Dropped {
		out = append(out, FormatKnobs(d.Knobs, nil)+": "+d.Reason)
	}
	return out
}

const gpu8 = "name: x\nmodel: {family: gpt, preset: 124m}\nworkload: {device: cuda, gpus: 8}\n"

func TestOneAtATime(t *testing.T) {
	p := expandText(t, gpu8+`baseline: {precision: bf16}
sweep:
  strategy: one-at-a-time
  knobs:
    precision: [fp32, bf16]
    activation_checkpointing: [false, true]
    nccl.algo: [Ring, NVLS]
`, ExpandOptions{})
	assert.Equal(t, []string{"", "precision=fp32", "activation_checkpointing=true", "nccl.algo=Ring"}, changedSets(p))
	assert.Equal(t, p.Trials[0].ID, p.BaselineID)
	assert.Equal(t, []string{"nccl.algo=NVLS: nccl.algo=NVLS needs NVLink multicast, which casestudy keeps off (NCCL_NVLS_ENABLE=0); set sweep.allow_nvls: true to plan it"}, reasons(p))
	for i, tr := range p.Trials {
		assert.Equal(t, i, tr.Index)
		assert.Equal(t, "bf16", p.Trials[0].Knobs["precision"])
		assert.Contains(t, tr.Knobs, "ddp.bucket_mb", "every knob is resolved")
		assert.NotContains(t, tr.Knobs, "image_size", "knobs of other families are left out")
		assert.NotContains(t, tr.Knobs, "fault.kind", "hidden knobs are left out unless set")
	}
}

func TestAllowNVLS(t *testing.T) {
	p := expandText(t, gpu8+"sweep: {strategy: grid, allow_nvls: true, knobs: {nccl.algo: [NVLS, NVLSTree]}}\n", ExpandOptions{})
	assert.Len(t, p.Trials, 2)
	assert.Empty(t, p.Dropped)
}

func TestGridDropsWithReasons(t *testing.T) {
	p := expandText(t, `name: x
model: {family: gpt, preset: tiny}
workload: {device: cpu, ranks: 2}
sweep:
  strategy: grid
  knobs:
    pipeline.stages: [1, 2, 4]
    precision: [fp32, fp16]
    activation_checkpointing: [false, true]
  exclude:
    - {precision: fp16, pipeline.stages: 2}
  constraints:
    - precision != fp16 || activation_checkpointing == false
`, ExpandOptions{})
	assert.Equal(t, 12, p.Size)
	assert.Equal(t, []string{
		"activation_checkpointing=false pipeline.stages=1 precision=fp32",
		"activation_checkpointing=true pipeline.stages=1 precision=fp32",
		"activation_checkpointing=false pipeline.stages=1 precision=fp16",
		"activation_checkpointing=false pipeline.stages=2 precision=fp32",
		"activation_checkpointing=true pipeline.stages=2 precision=fp32",
	}, changedSetsAll(p))
	assert.Equal(t, []string{
		`activation_checkpointing=true pipeline.stages=1 precision=fp16: constraint "precision != fp16 || activation_checkpointing == false" does not hold`,
		"activation_checkpointing=false pipeline.stages=2 precision=fp16: excluded by sweep.exclude[0] (pipeline.stages=2 precision=fp16)",
		"activation_checkpointing=true pipeline.stages=2 precision=fp16: excluded by sweep.exclude[0] (pipeline.stages=2 precision=fp16)",
		"activation_checkpointing=false pipeline.stages=4 precision=fp32: pipeline.stages=4 exceeds the trial's 2 ranks",
		"activation_checkpointing=true pipeline.stages=4 precision=fp32: pipeline.stages=4 exceeds the trial's 2 ranks",
		"activation_checkpointing=false pipeline.stages=4 precision=fp16: pipeline.stages=4 exceeds the trial's 2 ranks",
		"activation_checkpointing=true pipeline.stages=4 precision=fp16: pipeline.stages=4 exceeds the trial's 2 ranks",
	}, reasons(p))
}

func changedSetsAll(p *Plan) []string {
	var out []string
	for _, t := range p.Trials {
		out = append(out, FormatKnobs(t.Knobs, []string{"activation_checkpointing", "pipeline.stages", "precision"}))
	}
	return out
}

func TestRegistryDrops(t *testing.T) {
	one := "name: x\nmodel: {family: bert, preset: base}\nworkload: {device: cuda, gpus: 1}\n"
	p := expandText(t, one+"sweep: {strategy: one-at-a-time, knobs: {nccl.algo: [Ring, Tree], nccl.proto: [LL], ddp.bucket_mb: [5], graphs: [true]}}\n", ExpandOptions{})
	assert.Equal(t, []string{"", "graphs=true"}, changedSets(p))
	assert.Equal(t, []string{
		"nccl.algo=Ring: nccl.algo=Ring needs more than one rank in the communicator (this trial has 1): with one rank there is no collective to tune",
		"nccl.algo=Tree: nccl.algo=Tree needs more than one rank in the communicator (this trial has 1): with one rank there is no collective to tune",
		"nccl.proto=LL: nccl.proto=LL needs more than one rank in the communicator (this trial has 1): with one rank there is no collective to tune",
		"ddp.bucket_mb=5: ddp.bucket_mb=5 has no effect with one data-parallel rank (ranks 1, pipeline.stages 1)",
	}, reasons(p))

	// Graphs on cpu stay in the plan: the engine refuses them (unsupported).
	p = expandText(t, "name: x\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu}\nsweep: {strategy: grid, knobs: {graphs: [false, true]}}\n", ExpandOptions{})
	assert.Len(t, p.Trials, 2)

	// procs_per_gpu > 1 runs independent replicas: no communicator to tune.
	p = expandText(t, "name: x\nmodel: {family: bert, preset: base}\nworkload: {device: cuda, gpus: 2}\n"+
		"sweep: {strategy: grid, knobs: {procs_per_gpu: [1, 2], nccl.algo: [auto, Ring]}}\n", ExpandOptions{})
	assert.Equal(t, []string{"", "nccl.algo=Ring", "procs_per_gpu=2"}, changedSets(p))
	assert.Contains(t, reasons(p), "nccl.algo=Ring procs_per_gpu=2: nccl.algo=Ring needs more than one rank in the communicator (this trial has 1): with one rank there is no collective to tune")
	s := loadText(t, "name: x\nmodel: {family: bert, preset: base}\nworkload: {device: cuda, gpus: 2, procs_per_gpu: 2}\n")
	assert.Equal(t, 4, s.RanksFor(s.Baseline))
	assert.Equal(t, 1, s.WorldFor(s.Baseline))
	assert.Equal(t, 2, s.WorldFor(map[string]string{"procs_per_gpu": "1"}))
}

func TestListAndDuplicates(t *testing.T) {
	p := expandText(t, gpu8+`sweep:
  strategy: list
  trials:
    - {precision: bf16, activation_checkpointing: true}
    - {precision: BF16, activation_checkpointing: "true"}
    - {precision: fp32}
`, ExpandOptions{})
	assert.Len(t, p.Trials, 2)
	require.Len(t, p.Dropped, 1)
	assert.Equal(t, "same configuration as trial "+p.Trials[0].ID, p.Dropped[0].Reason)
	assert.Equal(t, p.Trials[1].ID, p.BaselineID, "precision fp32 is the (default) baseline")
}

func TestNoSweepPlansTheBaseline(t *testing.T) {
	p := expandText(t, gpu8+"baseline: {precision: bf16}\n", ExpandOptions{})
	require.Len(t, p.Trials, 1)
	assert.Equal(t, p.Trials[0].ID, p.BaselineID)
}

func TestTrialLimit(t *testing.T) {
	var vals []string
	for i := 1; i <= 30; i++ {
		vals = append(vals, fmt.Sprint(i))
	}
	list := "[" + strings.Join(vals, ", ") + "]"
	text := gpu8 + "sweep: {strategy: grid, knobs: {grad_accum: " + list + ", micro_batch: " + list + "}}\n"
	s := loadText(t, text)
	_, err := Expand(s, ExpandOptions{})
	require.Error(t, err)
	assert.Equal(t, exitcode.Input, exitcode.Of(err))
	assert.Contains(t, err.Error(), "s.yaml:4:8: sweep expands to 30x30 = more than 500 trials, above the limit of 500 (raise the limit with --max-trials")
	p, err := Expand(s, ExpandOptions{MaxTrials: 900})
	require.NoError(t, err)
	assert.Len(t, p.Trials, 900)

	// The product is computed, not expanded: a 10^40 grid is refused at once.
	huge := gpu8 + "sweep: {strategy: grid, knobs: {"
	for _, k := range []string{"grad_accum", "micro_batch", "ddp.bucket_mb", "pipeline.microbatches", "nccl.min_channels", "nccl.max_channels", "fault.rank", "fault.at_step", "fault.slow_ms", "seq_len"} {
		huge += k + ": " + list + ", "
	}
	_, err = Expand(loadText(t, huge+"}}\n"), ExpandOptions{MaxTrials: MaxTrialsCeiling})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than 20000 trials")
	assert.Contains(t, err.Error(), "narrow the sweep: 20000 is the most --max-trials allows")

	// sweep.max_trials only lowers the limit.
	_, err = Expand(loadText(t, gpu8+"sweep: {strategy: one-at-a-time, max_trials: 2, knobs: {precision: [fp32, bf16, fp16]}}\n"), ExpandOptions{MaxTrials: 100})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sweep.max_trials sets this limit")
}

func TestAllDroppedIsAnError(t *testing.T) {
	s := loadText(t, "name: x\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu}\nsweep: {strategy: list, trials: [{pipeline.stages: 2}]}\n")
	_, err := Expand(s, ExpandOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no trial left to run: all 1 combinations were dropped (first: pipeline.stages=2: pipeline.stages=2 exceeds the trial's 1 ranks)")
}

func TestTrialIDsAreStable(t *testing.T) {
	a := expandText(t, gpu8+"baseline: {precision: bf16}\nsweep: {strategy: grid, knobs: {activation_checkpointing: [false, true], ddp.bucket_mb: [5, 25]}}\n", ExpandOptions{})
	b := expandText(t, gpu8+"baseline: {precision: BF16}\nsweep: {strategy: grid, knobs: {ddp.bucket_mb: [25.0, 5], activation_checkpointing: [true, false]}}\n", ExpandOptions{})
	ids := func(p *Plan) map[string]string {
		m := map[string]string{}
		for _, t := range p.Trials {
			m[FormatKnobs(t.Knobs, []string{"activation_checkpointing", "ddp.bucket_mb"})] = t.ID
		}
		return m
	}
	assert.Equal(t, ids(a), ids(b), "IDs do not depend on sweep order or spelling")
	assert.Len(t, ids(a), 4)

	// Fixed values: the ID of a configuration never changes between runs or versions.
	assert.Equal(t, TrialID(map[string]string{"precision": "bf16", "graphs": "true"}),
		TrialID(map[string]string{"graphs": "true", "precision": "bf16", "ddp.bucket_mb": "25"}), "defaults do not count")
	assert.Equal(t, "fe7032ec", TrialID(map[string]string{"precision": "bf16", "graphs": "true"}))
	assert.Equal(t, "fe7032ec", TrialID(map[string]string{"precision": "bf16", "graphs": "true", "profile": "3"}),
		"profile changes what is recorded, not what is measured: the same trial")
	assert.Regexp(t, "^[0-9a-f]{8}$", a.Trials[0].ID)
}

func TestConstraints(t *testing.T) {
	vals := map[string]string{"precision": "fp16", "graphs": "false", "pipeline.stages": "2", "nccl.buffsize": "8388608",
		"nccl.min_channels": "auto", "channels_last": "true"}
	get := func(n string) string {
		switch n {
		case "ranks":
			return "8"
		case "device":
			return "cuda"
		}
		return vals[n]
	}
	tests := []struct {
		src  string
		want bool
	}{
		{"precision != fp16 || graphs == false", true},
		{"precision == FP16 && graphs", false},
		{"!graphs && channels_last", true},
		{"pipeline.stages <= ranks", true},
		{"ranks < pipeline.stages", false},
		{"nccl.buffsize <= 4MiB", false},
		{"nccl.buffsize > 4194304", true},
		{"nccl.min_channels >= 4", true}, // auto: left to the library
		{"(precision == bf16 || precision == fp16) && device == cuda", true},
		{"!(precision == fp16)", false},
		{"pipeline.stages == 2 && 8 == ranks", true},
		{`precision == "fp16"`, true},
	}
	for _, tt := range tests {
		e, err := ParseExpr(tt.src)
		require.NoError(t, err, tt.src)
		assert.Equal(t, tt.want, e.Eval(get), tt.src)
	}
	bad := map[string]string{
		"":                            "empty expression",
		"precision ==":                "ends too early",
		"(graphs":                     "missing )",
		"graphs)":                     `unexpected ")"`,
		"precision":                   "precision is a enum knob: compare it",
		"fp16 == fp32":                "neither",
		"precision < fp16":            "precision is not a number",
		"ranks == lots":               `ranks: "lots" is not an integer`,
		"device == gpu":               `device: "gpu" is not one of`,
		"family == bart":              `family: "bart" is not one of`,
		"graphs == maybe":             "not a boolean",
		"precision = fp16":            "unexpected character '='",
		"precision == 'fp16":          "unterminated quote",
		"grpahs":                      `"grpahs" is not a boolean knob (did you mean "graphs"?)`,
		"graphs && && graphs":         `unexpected "&&"`,
		"nccl.algo < pipeline.stages": "nccl.algo is not a number",
	}
	for src, want := range bad {
		_, err := ParseExpr(src)
		if assert.Error(t, err, src) {
			assert.Contains(t, err.Error(), want, src)
		}
	}
}

func TestGreedy(t *testing.T) {
	s := loadText(t, gpu8+`baseline: {precision: fp32}
sweep:
  strategy: greedy
  knobs:
    precision: [fp32, bf16, fp16]
    nccl.algo: [Ring, NVLS, Tree]
    graphs: [false]
    ddp.bucket_mb: [5, 50]
`)
	g, err := NewGreedy(s)
	require.NoError(t, err)

	knob, trials, done := g.Next()
	require.False(t, done)
	assert.Equal(t, "precision", knob)
	assert.Equal(t, []string{"", "precision=bf16", "precision=fp16"}, trialSets(trials))
	baseID := trials[0].ID
	require.NoError(t, g.Choose(trials[1].ID)) // bf16 wins
	assert.Error(t, g.Choose("nope"))

	knob, trials, done = g.Next()
	require.False(t, done)
	assert.Equal(t, "nccl.algo", knob)
	assert.Equal(t, []string{"precision=bf16", "nccl.algo=Ring precision=bf16", "nccl.algo=Tree precision=bf16"}, trialSets(trials))
	require.Len(t, g.Dropped(), 1)
	assert.Contains(t, g.Dropped()[0].Reason, "allow_nvls")
	assert.Equal(t, 1, trials[0].Index, "a trial keeps its index across rounds")
	require.NoError(t, g.Choose(trials[2].ID)) // Tree wins

	// graphs: [false] only repeats the best: the round is skipped.
	knob, trials, done = g.Next()
	require.False(t, done)
	assert.Equal(t, "ddp.bucket_mb", knob)
	assert.Equal(t, []string{"nccl.algo=Tree precision=bf16", "ddp.bucket_mb=5 nccl.algo=Tree precision=bf16",
		"ddp.bucket_mb=50 nccl.algo=Tree precision=bf16"}, trialSets(trials))
	// No Choose: the best stays.
	_, _, done = g.Next()
	assert.True(t, done)
	assert.Equal(t, "Tree", g.Best()["nccl.algo"])
	assert.Equal(t, "25", g.Best()["ddp.bucket_mb"])

	// The plan shows the first round and the rounds to come.
	p, err := Expand(s, ExpandOptions{})
	require.NoError(t, err)
	assert.Equal(t, "greedy", p.Strategy)
	assert.Equal(t, []string{"precision", "nccl.algo", "graphs", "ddp.bucket_mb"}, p.Rounds)
	assert.Len(t, p.Trials, 3)
	assert.Equal(t, baseID, p.BaselineID)
	assert.Equal(t, 10, p.Size)
}

func trialSets(ts []Trial) []string {
	var out []string
	for _, t := range ts {
		out = append(out, FormatKnobs(t.Knobs, t.Changed))
	}
	return out
}

// TestProfileIsNotSwept: profile is set for every trial (baseline or run
// --profile); a sweep of it is an input error naming the line.
func TestProfileIsNotSwept(t *testing.T) {
	s := loadText(t, "name: x\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu}\nbaseline: {profile: 2}\n"+
		"sweep: {strategy: one-at-a-time, knobs: {precision: [bf16]}}\n")
	p, err := Expand(s, ExpandOptions{})
	require.NoError(t, err)
	for _, tr := range p.Trials {
		assert.Equal(t, "2", tr.Knobs["profile"])
		assert.NotContains(t, tr.Changed, "profile")
	}
	msg := loadErr(t, map[string]string{"s.yaml": "name: x\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu}\n" +
		"sweep: {strategy: grid, knobs: {profile: [off, 3]}}\n"}, "s.yaml", LoadOptions{})
	assert.Contains(t, msg, "profile cannot be swept")
	assert.Contains(t, msg, "s.yaml:4")
}
