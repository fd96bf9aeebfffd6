package study

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
)

func TestApplyOverrides(t *testing.T) {
	dir := writeStudies(t, map[string]string{
		"gpu.yaml": "name: g\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 1, repeats: 3}\n",
		"cpu.yaml": "name: c\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, repeats: 3, interleave: false}\n",
	})
	load := func(name string) *Study {
		s, err := Load(filepath.Join(dir, name), LoadOptions{})
		require.NoError(t, err)
		return s
	}
	s := load("gpu.yaml")
	require.NoError(t, ApplyOverrides(s, map[string]string{"repeats": "auto", "max-time": "9m", "warmup": "3", "steps": "25", "gpus": "2"}))
	assert.Equal(t, 0, s.Workload.Repeats)
	assert.Equal(t, 9*time.Minute, s.Workload.MaxTime)
	assert.Equal(t, 3, s.Workload.WarmupSteps)
	assert.Equal(t, 25, s.Workload.Steps)
	assert.Equal(t, 2, s.Workload.GPUs)
	assert.Equal(t, 2, s.Workload.Ranks)
	assert.Equal(t, []string{"--repeats", "auto", "--max-time", "9m", "--warmup", "3", "--steps", "25", "--gpus", "2"},
		OverrideArgs(map[string]string{"gpus": "2", "steps": "25", "warmup": "3", "max-time": "9m", "repeats": "auto"}))

	c := load("cpu.yaml")
	require.NoError(t, ApplyOverrides(c, map[string]string{"repeats": "auto", "ranks": "2"}))
	assert.True(t, c.Workload.Interleave, "auto interleaves")
	assert.Equal(t, 2, c.Workload.Ranks)

	for _, tc := range []struct {
		file string
		o    map[string]string
		want string
	}{
		{"gpu.yaml", map[string]string{"repeats": "0"}, "--repeats 0: give a number of launches per trial (1..100) or auto"},
		{"gpu.yaml", map[string]string{"repeats": "many"}, "--repeats many:"},
		{"gpu.yaml", map[string]string{"max-time": "10"}, "--max-time 10: give a duration in 1s..48h"},
		{"gpu.yaml", map[string]string{"steps": "0"}, "--steps 0: give an integer in 1..1000000"},
		{"gpu.yaml", map[string]string{"ranks": "2"}, "--ranks 2: ranks on cuda are gpus x nodes x procs_per_gpu; set --gpus instead"},
		{"cpu.yaml", map[string]string{"gpus": "2"}, "--gpus 2: the study runs on the CPU"},
		{"gpu.yaml", map[string]string{"seed": "2"}, `unknown override "seed"`},
	} {
		err := ApplyOverrides(load(tc.file), tc.o)
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
		assert.Equal(t, exitcode.Input, exitcode.Of(err))
	}
}
