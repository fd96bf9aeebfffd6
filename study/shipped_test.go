package study

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/knobs"
)

// shippedStudies is every .yaml under studies/ (studies/**/*.yaml).
func shippedStudies(t *testing.T) []string {
	var out []string
	require.NoError(t, filepath.WalkDir("../studies", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			out = append(out, p)
		}
		return err
	}))
	return out
}

func TestShippedStudiesValidate(t *testing.T) {
	files := shippedStudies(t)
	for _, want := range []string{"gpt.yaml", "bert.yaml", "resnet50.yaml", "gpt/smoke.yaml", "bert/smoke.yaml",
		"resnet50/smoke.yaml", "gpt/pipeline.yaml", "bert/nccl.yaml", "resnet50/mps.yaml"} {
		assert.Contains(t, files, filepath.Join("../studies", want))
	}
	names := map[string]string{}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			s, err := Load(f, LoadOptions{})
			require.NoError(t, err)
			p, err := Expand(s, ExpandOptions{})
			require.NoError(t, err)
			assert.NotEmpty(t, p.Trials)
			assert.NotEmpty(t, s.Description)
			assert.True(t, strings.HasPrefix(string(s.Text), "#"), "a shipped study starts with a comment block on what it asks and why")
			if prev, dup := names[s.Name]; dup {
				t.Errorf("name %q is used by %s too", s.Name, prev)
			}
			names[s.Name] = f
			assert.False(t, s.Sweep.AllowNVLS, "no shipped study enables NVLS")
			for _, tr := range p.Trials {
				if s.Workload.Device == "cpu" {
					assert.NotEqual(t, "true", tr.Knobs["graphs"], "trial %s: CUDA graphs on the CPU (the engine refuses them)", tr.ID)
				}
				assert.False(t, knobs.IsNVLS(tr.Knobs["nccl.algo"]))
				set, _ := knobs.Environment(tr.Knobs)
				assert.Equal(t, "0", set[knobs.NVLSEnableVar])
			}
			if filepath.Base(f) == "smoke.yaml" {
				assert.Equal(t, "cpu", s.Workload.Device)
				assert.Equal(t, "tiny", s.Model.Preset)
				assert.LessOrEqual(t, s.Workload.Steps, 5)
				assert.LessOrEqual(t, s.Workload.Repeats, 3) // gpt's 3 let the tutorial's gate judge a run
				assert.GreaterOrEqual(t, len(p.Trials), 2)
				assert.LessOrEqual(t, len(p.Trials), 4)
			} else if !strings.Contains(f, "/gpt/") && !strings.Contains(f, "/bert/") && !strings.Contains(f, "/resnet50/") {
				assert.Equal(t, "cuda", s.Workload.Device, "headline studies run on the GPU")
				assert.True(t, s.Workload.GPUsAll, "headline studies run on every GPU of the node (gpus: all)")
				assert.Equal(t, 1, s.Workload.GPUs, "unresolved, gpus: all plans for one GPU")
				assert.Equal(t, 0, s.Workload.Repeats, "headline studies launch until decided (repeats: auto)")
				assert.Positive(t, s.Workload.MaxTime, "headline studies have a time budget")
				assert.Equal(t, "true", s.Baseline["graphs"], "headline studies start from the fastest one-GPU settings (CUDA graphs)")
				assert.Contains(t, s.Sweep.Knobs["graphs"], "false", "headline studies try eager steps as a trial")
			}
		})
	}
}

func TestChildMaySwitchDevice(t *testing.T) {
	dir := writeStudies(t, map[string]string{
		"p.yaml":   "name: p\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 8, procs_per_gpu: 2}\n",
		"c/c.yaml": "name: c\nextends: ../p.yaml\nworkload: {device: cpu, ranks: 2}\n",
	})
	s, err := Load(filepath.Join(dir, "c", "c.yaml"), LoadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "cpu", s.Workload.Device)
	assert.Equal(t, 0, s.Workload.GPUs)
	assert.Equal(t, 2, s.RanksFor(s.Baseline))
}
