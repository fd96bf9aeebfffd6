package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
)

// complete asks casestudy for completions as the shell scripts do (the
// hidden __complete command) and returns the candidates without their
// descriptions, and the directive.
func complete(t *testing.T, args ...string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{cobra.ShellCompRequestCmd}, args...)...)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.NotEmpty(t, lines)
	last := lines[len(lines)-1]
	require.True(t, strings.HasPrefix(last, ":"), stdout)
	var d int
	for _, c := range last[1:] {
		d = d*10 + int(c-'0')
	}
	var out []string
	for _, l := range lines[:len(lines)-1] {
		out = append(out, strings.SplitN(l, "\t", 2)[0])
	}
	return out, cobra.ShellCompDirective(d)
}

func TestCompletion(t *testing.T) {
	t.Chdir(repoRoot(t))
	// a results tree: results/<study>/<run>/manifest.json
	res := t.TempDir()
	for _, run := range []string{"gpt-smoke/20260101T000000Z-aaaaaa", "gpt-smoke/20260102T000000Z-bbbbbb", "bert/20260101T000000Z-cccccc"} {
		require.NoError(t, os.MkdirAll(filepath.Join(res, run), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(res, run, "manifest.json"), []byte(`{"schema":1,"plan":[{"id":"ab12cd34","knobs":{"precision":"bf16"},"changed":["precision"]}]}`), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(res, "empty"), 0o755))
	run := filepath.Join(res, "gpt-smoke", "20260101T000000Z-aaaaaa")

	got, _ := complete(t, "va")
	assert.Equal(t, []string{"validate"}, got, "commands")
	got, d := complete(t, "knobs", "ddp.bucket")
	assert.Equal(t, []string{"ddp.bucket_mb"}, got)
	assert.Equal(t, cobra.ShellCompDirectiveNoFileComp, d)

	got, _ = complete(t, "check", "x", "--fail-on", "")
	assert.Equal(t, []string{"info", "warning", "error"}, got)
	got, d = complete(t, "report", "x", "--format", "html,")
	assert.Equal(t, []string{"html,json", "html,md"}, got)
	assert.NotZero(t, d&cobra.ShellCompDirectiveNoSpace, "a list goes on")
	got, _ = complete(t, "compare", "a", "b", "--format", "")
	assert.Equal(t, report.CompareFormats, got)
	got, _ = complete(t, "models", "")
	assert.Equal(t, []string{"gpt", "bert", "resnet50"}, got, "the engine's families, in its listing order")

	got, d = complete(t, "run", "")
	assert.Equal(t, []string{"yaml", "yml"}, got)
	assert.Equal(t, cobra.ShellCompDirectiveFilterFileExt, d)

	// trial IDs from the study's plan, or from the run --resume names
	_, planOut, _ := runCLI(t, "plan", "studies/gpt/smoke.yaml")
	got, _ = complete(t, "run", "studies/gpt/smoke.yaml", "--trial", "")
	require.Len(t, got, 3)
	for _, id := range got {
		assert.Contains(t, planOut, id)
	}
	got, _ = complete(t, "run", "--resume", run, "--trial", "ab")
	assert.Equal(t, []string{"ab12cd34"}, got)

	// run directories: the folders on the way end in /, runs do not
	got, d = complete(t, "status", res+"/")
	assert.ElementsMatch(t, []string{res + "/bert/", res + "/gpt-smoke/"}, got, "empty/ holds no run")
	assert.NotZero(t, d&cobra.ShellCompDirectiveNoSpace)
	got, _ = complete(t, "check", res+"/gpt-smoke/2026010")
	assert.Equal(t, []string{res + "/gpt-smoke/20260101T000000Z-aaaaaa", res + "/gpt-smoke/20260102T000000Z-bbbbbb"}, got)
	got, _ = complete(t, "run", "--resume", res+"/b")
	assert.Equal(t, []string{res + "/bert/"}, got)
	got, _ = complete(t, "history", res+"/")
	assert.ElementsMatch(t, []string{res + "/bert", res + "/gpt-smoke"}, got, "a study's folder of runs")
	_, err := store.ReadRun(run)
	require.NoError(t, err, "the made-up runs are run directories")
}
