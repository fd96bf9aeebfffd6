package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
)

// TestPlanRehearseStudies: the studies issue 36 rehearses on one 80 GB GPU
// (79.6 GiB), through plan --rehearse --rehearse-distinct (the check run
// --rehearse makes before its first launch, with the engine describing the
// models): what runs, what is covered, what is refused with the number of
// ranks that fits. scripts/gpu-rehearse.sh reads the same line.
func TestPlanRehearseStudies(t *testing.T) {
	t.Setenv(engine.EnvLibrary, engineLibOrSkip(t))
	for _, tc := range []struct {
		study string
		code  int
		want  string // the plan's rehearsal line, or a part of the refusal
	}{
		{"gpt/ddp2-quick", 0, `rehearsal: 1 trials run, 1 skipped, 0 refused; at most 2 ranks a trial`},
		{"gpt/ddp4-quick", 0, `rehearsal: 1 trials run, 1 skipped, 0 refused; at most 4 ranks a trial`},
		{"gpt/ddp8-quick", 0, `rehearsal: 1 trials run, 1 skipped, 0 refused; at most 8 ranks a trial`},
		{"bert/ddp2-quick", 0, `rehearsal: 1 trials run, 1 skipped, 0 refused; at most 2 ranks a trial`},
		{"bert/ddp4-quick", 0, `rehearsal: 1 trials run, 1 skipped, 0 refused; at most 4 ranks a trial`},
		{"resnet50/ddp2-quick", 0, `rehearsal: 1 trials run, 1 skipped, 0 refused; at most 2 ranks a trial`},
		{"resnet50/ddp4-quick", 0, `rehearsal: 1 trials run, 1 skipped, 0 refused; at most 4 ranks a trial`},
		{"resnet50/ddp8-quick", 0, `rehearsal: 1 trials run, 1 skipped, 0 refused; at most 8 ranks a trial`},
		{"gpt/ddp", 0, `rehearsal: 4 trials run, \d+ skipped, 0 refused; at most 8 ranks a trial`},
		{"gpt/pipeline", 0, `rehearsal: 5 trials run, 10 skipped, 0 refused; at most 4 ranks a trial`},
		{"bert/zero", 0, `rehearsal: 2 trials run, 4 skipped, 3 refused; at most 8 ranks a trial`},
		{"bert/ddp8-quick", exitcode.Environment, `8 ranks share one GPU, about 9\.\d GiB each \(estimate\).*; 7 ranks per device fit`},
		{"gpt/multinode", exitcode.Environment, `16 ranks share one GPU.*; 1[0-2] ranks per device fit`},
		{"bert/multinode", exitcode.Environment, `16 ranks share one GPU.*; 7 ranks per device fit`},
		{"resnet50/multinode", exitcode.Environment, `16 ranks share one GPU.*; 1[0-2] ranks per device fit`},
	} {
		t.Run(tc.study, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "plan", "../../studies/"+tc.study+".yaml", "--rehearse", "--rehearse-distinct",
				"--rehearse-gpus", "1", "--rehearse-gpu-gib", "79.6")
			require.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Regexp(t, regexp.MustCompile(tc.want), stdout+stderr)
		})
	}
}

// TestPlanRehearseRefusal: without --rehearse-distinct every trial must fit:
// gpt/pipeline.yaml's GPipe with 16 micro-batches does not, and plan says so
// with exit status 3, as run --rehearse would; on two such GPUs it fits.
func TestPlanRehearseRefusal(t *testing.T) {
	t.Setenv(engine.EnvLibrary, engineLibOrSkip(t))
	code, stdout, stderr := runCLI(t, "plan", "../../studies/gpt/pipeline.yaml", "--rehearse", "--rehearse-gpu-gib", "79.6")
	require.Equal(t, exitcode.Environment, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr, "the rehearsal does not fit this machine")
	assert.Contains(t, stdout, "REFUSED: does not fit")
	code, stdout, stderr = runCLI(t, "plan", "../../studies/gpt/pipeline.yaml", "--rehearse", "--rehearse-gpus", "4", "--rehearse-gpu-gib", "79.6")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "rehearsal: 15 trials run, 0 skipped, 0 refused")
	code, _, stderr = runCLI(t, "plan", "../../studies/gpt/pipeline.yaml", "--rehearse", "--rehearse-gpus", "0")
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "--rehearse-gpus")
}
