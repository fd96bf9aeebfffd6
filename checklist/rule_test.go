package checklist

import (
	"bytes"
	"flag"
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
	required := []string{"precision", "fp16-overflow", "cuda-graphs", "bucket-size", "exposed-comm", "overlap-disabled",
		"nccl-forced", "busbw-vs-link", "topology", "pipeline-bubble", "pipeline-schedule-memory", "mps",
		"memory-headroom", "straggler", "measurement-hygiene", "no-effect-knob", "failed-trials"}
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
