package study

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorldOfOne: workload.world_of_one is a boolean, off by default,
// inherited through extends; a bad value names the field and its line.
func TestWorldOfOne(t *testing.T) {
	const head = "name: x\nmodel: {family: gpt, preset: tiny}\n"
	assert.False(t, loadText(t, head).Workload.WorldOfOne)
	assert.True(t, loadText(t, head+"workload: {world_of_one: true}\n").Workload.WorldOfOne)

	dir := writeStudies(t, map[string]string{
		"one.yaml": head + "workload: {gpus: 1, world_of_one: true}\n",
		"two.yaml": "extends: one.yaml\nname: two\nworkload: {gpus: 2}\n",
	})
	s, err := Load(dir+"/two.yaml", LoadOptions{})
	require.NoError(t, err)
	assert.True(t, s.Workload.WorldOfOne, "extends keeps it")

	msg := loadErr(t, map[string]string{"s.yaml": head + "workload: {world_of_one: maybe}\n"}, "s.yaml", LoadOptions{})
	assert.Contains(t, msg, "s.yaml:3")
	assert.Contains(t, msg, "workload.world_of_one")
}
