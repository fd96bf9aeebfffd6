package study

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// positioned matches "file:line:col: " at the start of every problem line.
var positioned = regexp.MustCompile(`(?m)^[^\n:]+\.yaml:\d+:\d+: `)

// TestHostileStudiesNamePlace: hostile studies found by the hardening review
// (issue 21, defects 1, 15, 16) are refused with exit status 2 and every
// problem names file:line:col.
func TestHostileStudiesNamePlace(t *testing.T) {
	const head = "name: x\nmodel: {family: gpt, preset: tiny}\n"
	tests := []struct {
		name string
		text string
		want string
	}{
		{"timeout of 1ns", head + "workload: {timeout: 1ns}\n", "3:21: workload.timeout: 1ns is outside 1s..48h"},
		{"timeout of 999ms", head + "workload: {timeout: 999ms}\n", "workload.timeout: 999ms is outside 1s..48h"},
		{"timeout of 49h", head + "workload: {timeout: 49h}\n", "workload.timeout: 49h0m0s is outside 1s..48h"},
		{"latin-1 byte", head + "description: caf\xe9\n", "3:17: not UTF-8 text: byte 0xe9"},
		{"truncated UTF-8", head + "description: x\xc3\n", "3:15: not UTF-8 text: byte 0xc3"},
		{"UTF-16 without BOM", "n\x00a\x00m\x00e\x00:\x00 \x00x\x00\n\x00", "1:2: control character 0x00"},
		{"control character", head + "description: a\x01b\n", "3:15: control character 0x01"},
		{"newline in partition", head + "launcher: {kind: slurm, partition: \"gpu\\ntouch /tmp/pwned\"}\n",
			`3:36: launcher.partition: "gpu\ntouch /tmp/pwned" has a character Slurm names do not use`},
		{"shell in account", head + "launcher: {account: \"a;rm -rf ~\"}\n", `launcher.account: "a;rm -rf ~" has a character`},
		{"space in qos", head + "launcher: {qos: \"normal high\"}\n", `launcher.qos: "normal high" has a character`},
		{"quote in reservation", head + "launcher: {reservation: \"r'x\"}\n", `launcher.reservation: "r'x" has a character`},
		{"CR in constraint", head + "launcher: {constraint: \"a100\\r\\nid\"}\n", `launcher.constraint: "a100\r\nid" has a character`},
		{"dollar in constraint", head + "launcher: {constraint: \"$(id)\"}\n", `launcher.constraint: "$(id)" has a character`},
		{"newline in time limit", head + "launcher: {time_limit: \"10\\nid\"}\n", `launcher.time_limit: "10\nid" has a character`},
		{"newline in srun args", head + "launcher: {srun_args: \"--x\\nid\"}\n", `launcher.srun_args: "--x\nid" spans lines`},
		{"newline in extra args", head + "launcher: {extra_args: \"--x\\nid\"}\n", `launcher.extra_args: "--x\nid" spans lines`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := loadErr(t, map[string]string{"s.yaml": tt.text}, "s.yaml", LoadOptions{})
			assert.Contains(t, got, tt.want)
			assert.Regexp(t, positioned, got)
		})
	}
}

// TestSlurmNamesThatAreFine: the values real clusters use pass.
func TestSlurmNamesThatAreFine(t *testing.T) {
	dir := writeStudies(t, map[string]string{"s.yaml": "name: x\nmodel: {family: gpt, preset: tiny}\n" +
		"launcher: {partition: 'gpu,gpu-long', account: proj_123-a, qos: high.prio, reservation: maint@2, " +
		"constraint: '[a100&ib|h100*2]', time_limit: '1-12:30:00', extra_args: '--exclusive --mem=0'}\n"})
	_, err := Load(filepath.Join(dir, "s.yaml"), LoadOptions{})
	require.NoError(t, err)
}

// TestExtendsADirectory: extends naming a folder is reported where extends is written.
func TestExtendsADirectory(t *testing.T) {
	dir := writeStudies(t, map[string]string{"a.yaml": "name: a\nextends: sub\nmodel: {family: gpt, preset: tiny}\n"})
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	_, err := Load(filepath.Join(dir, "a.yaml"), LoadOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `a.yaml:2:10: extends "sub": is a directory, not a study file`)
}
