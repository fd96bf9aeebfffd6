package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// memoryCgroup makes a memory cgroup limited to limit bytes (v1 or v2, root
// only) and returns its cgroup.procs; it is removed when the test ends.
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a memory cgroup needs root; runner.TestKernelOOMKillIsOOM covers the classification")
	}
	name := fmt.Sprintf("casestudy-oom-test-%d", os.Getpid())
	var dir string
	var limits map[string]string
	switch {
	case fileExists("/sys/fs/cgroup/memory/memory.limit_in_bytes"): // v1
		dir = filepath.Join("/sys/fs/cgroup/memory", name)
		limits = map[string]string{"memory.limit_in_bytes": strconv.FormatInt(limit, 10), "memory.swappiness": "0"}
	case fileExists("/sys/fs/cgroup/cgroup.controllers"): // v2
		dir = filepath.Join("/sys/fs/cgroup", name)
		limits = map[string]string{"memory.max": strconv.FormatInt(limit, 10), "memory.swap.max": "0"}
	default:
		t.Skip("no memory cgroup controller here")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	for f, v := range limits {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil && f != "memory.swappiness" && f != "memory.swap.max" {
			t.Skipf("cannot limit the cgroup's memory: %v", err)
		}
	}
	return filepath.Join(dir, "cgroup.procs")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestRealOOMKillIsOOM: a rank that takes host memory inside a limited
// cgroup is ended by the kernel's OOM killer with SIGKILL and no word; the
// trial is recorded oom, not crashed or failed (issue 21, defect 9).
func TestRealOOMKillIsOOM(t *testing.T) {
	lib := engineLibOrSkip(t)
	procs := memoryCgroup(t, 1<<30)
	dir := t.TempDir()
	study := filepath.Join(dir, "studies", "oom.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(study), 0o755))
	require.NoError(t, os.WriteFile(study, []byte(`name: oom
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 32}
workload: {device: cpu, ranks: 1, warmup_steps: 1, steps: 3, timeout: 2m, threads: 1}
sweep: {strategy: list, trials: [{fault.kind: leak, fault.at_step: 1}, {fault.kind: none}]}
`), 0o644))
	exe, err := os.Executable()
	require.NoError(t, err)
	out := filepath.Join(dir, "results")
	cmd := exec.Command("sh", "-c", `echo $$ > "$CGROUP_PROCS" && exec "$0" "$@"`, exe, "run", study, "--out", out)
	cmd.Env = append(os.Environ(), asMainEnv+"=1", engine.EnvLibrary+"="+lib, "CGROUP_PROCS="+procs)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	require.NoError(t, cmd.Run(), buf.String())
	run, err := store.ReadRun(onlyRunDir(t, out))
	require.NoError(t, err)
	got := map[string]store.TrialRecord{}
	for _, tr := range run.Trials {
		got[tr.Knobs["fault.kind"]] = tr
	}
	leak := got["leak"]
	assert.Equal(t, store.OOM, leak.Outcome, leak.Error)
	assert.Equal(t, "SIGKILL", leak.Signal)
	assert.Contains(t, leak.Error, "OOM killer")
	assert.Equal(t, store.OK, got["none"].Outcome, "the next trial runs: %s", got["none"].Error)
}
