package study

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// changedKnobs is every knob some trial of p changes.
func changedKnobs(p *Plan) map[string]bool {
	out := map[string]bool{}
	for _, t := range p.Trials {
		for _, k := range t.Changed {
			out[k] = true
		}
	}
	return out
}

// TestHeadlineStudiesOnOneAndEightGPUs: gpus: all on one GPU plans the
// one-GPU trials (no data-parallel knob changed, each data-parallel trial
// dropped with its reason, graphs: true kept); on 8 GPUs the same study
// sweeps ddp.bucket_mb, ddp.overlap, nccl.algo and nccl.proto from a baseline
// without CUDA graphs, and drops graphs: true with its reason.
func TestHeadlineStudiesOnOneAndEightGPUs(t *testing.T) {
	dp := []string{"ddp.bucket_mb", "ddp.overlap", "nccl.algo", "nccl.proto"}
	for _, name := range []string{"gpt", "bert", "resnet50"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("..", "studies", name+".yaml")
			one, err := Load(path, LoadOptions{})
			require.NoError(t, err)
			require.True(t, one.Workload.GPUsAll)
			unresolved, err := Expand(one, ExpandOptions{})
			require.NoError(t, err)
			one.ResolveGPUs(1)
			p1, err := Expand(one, ExpandOptions{})
			require.NoError(t, err)
			assert.Equal(t, unresolved.Trials, p1.Trials, "all on one GPU plans what gpus: 1 plans")
			assert.Equal(t, 1, one.RanksFor(one.Baseline))
			assert.Equal(t, "true", one.Baseline["graphs"])
			ch := changedKnobs(p1)
			for _, k := range dp {
				assert.False(t, ch[k], "%s changed by a one-GPU trial", k)
			}
			reasons := map[string]string{}
			for _, d := range p1.Dropped {
				for k := range d.Knobs {
					reasons[k] = d.Reason
				}
			}
			for _, k := range dp {
				assert.NotEmpty(t, reasons[k], "%s dropped on one GPU with its reason", k)
			}
			assert.Contains(t, reasons["ddp.bucket_mb"], "one data-parallel rank")
			assert.Contains(t, reasons["nccl.algo"], "needs more than one rank")

			eight, err := Load(path, LoadOptions{})
			require.NoError(t, err)
			eight.ResolveGPUs(8)
			p8, err := Expand(eight, ExpandOptions{})
			require.NoError(t, err)
			assert.Equal(t, 8, eight.RanksFor(eight.Baseline))
			assert.Equal(t, "false", eight.Baseline["graphs"], "the engine captures one rank only")
			require.Len(t, p8.Notes, 2)
			assert.Contains(t, p8.Notes[0], "baseline graphs: true became false")
			assert.Equal(t, "workload.gpus: all is 8 GPU(s) on this node", p8.Notes[1])
			ch = changedKnobs(p8)
			for _, k := range dp {
				assert.True(t, ch[k], "%s swept on 8 GPUs", k)
			}
			var graphs string
			for _, d := range p8.Dropped {
				if d.Knobs["graphs"] == "true" {
					graphs = d.Reason
				}
			}
			assert.Contains(t, graphs, "graphs=true with 8 ranks in the communicator")
			assert.Greater(t, len(p8.Trials), len(p1.Trials))
		})
	}
}

func TestGPUsAll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "studies")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	parent := write("parent.yaml", "name: p\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: ALL}\n")
	s, err := Load(parent, LoadOptions{})
	require.NoError(t, err)
	assert.True(t, s.Workload.GPUsAll)
	s.ResolveGPUs(0)
	assert.Equal(t, 1, s.Workload.GPUs, "a machine without GPUs plans for one")
	assert.Equal(t, []string{"workload.gpus: all is 1 GPU(s) on this node"}, s.Notes)

	child := write("child.yaml", "extends: parent.yaml\nname: c\nworkload: {gpus: 2}\n")
	s, err = Load(child, LoadOptions{})
	require.NoError(t, err)
	assert.False(t, s.Workload.GPUsAll, "a child's number replaces its parent's all")
	s.ResolveGPUs(8)
	assert.Equal(t, 2, s.Workload.GPUs)
	assert.Empty(t, s.Notes)

	s, err = Load(parent, LoadOptions{})
	require.NoError(t, err)
	require.NoError(t, ApplyOverrides(s, map[string]string{"gpus": "4"}))
	assert.False(t, s.Workload.GPUsAll, "--gpus replaces all")
	assert.Equal(t, 4, s.RanksFor(s.Baseline))

	_, err = Load(write("cpu.yaml", "name: x\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, gpus: all}\n"), LoadOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "workload.gpus: all contradicts device cpu")
	_, err = Load(write("bad.yaml", "name: x\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: every}\n"), LoadOptions{})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), `workload.gpus: expected a number of GPUs (0..1024) or all, got "every"`), err.Error())
}
