package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
)

// TestTwoResumesAtOnce: while one runner process resumes a run directory, a
// second resume of it is refused with the first one's pid and host, and
// nothing is written twice (issue 21, defect 5). The first runner is stuck in
// a hanging trial (interleave off: the trials run in list order), so it
// certainly holds the run while the second tries.
func TestTwoResumesAtOnce(t *testing.T) {
	f := newFixture(t, `name: two-resumes
model: {family: gpt, preset: tiny}
workload: {device: cpu, ranks: 1, warmup_steps: 0, steps: 2, timeout: 60s, interleave: false}
sweep:
  strategy: list
  trials: [{fault.kind: none}, {fault.kind: hang, fault.at_step: 0}]
`)
	require.NoError(t, f.w.Close())
	exe, _ := os.Executable()
	first := exec.Command(exe)
	first.Env = append(os.Environ(), roleEnv+"=runner", "CASESTUDY_TEST_DIR="+f.dir, "CASESTUDY_TEST_RUN="+f.w.Dir)
	require.NoError(t, first.Start())
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	holder := fmt.Sprintf("pid %d on ", first.Process.Pid)
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(f.w.Dir, store.LockName))
		return strings.Contains(string(b), holder)
	}, 20*time.Second, 5*time.Millisecond, "the first runner took the lock")
	require.Eventually(t, func() bool {
		recs, _ := store.ReadTrials(filepath.Join(f.w.Dir, "trials.jsonl"))
		return len(recs) == 1
	}, 20*time.Second, 5*time.Millisecond, "the first runner committed its first trial and hangs in the second")

	before, err := os.ReadFile(filepath.Join(f.w.Dir, "trials.jsonl"))
	require.NoError(t, err)
	_, _, err = store.OpenExisting(f.w.Dir)
	require.ErrorIs(t, err, store.ErrLocked)
	host, _ := os.Hostname()
	assert.Contains(t, err.Error(), holder+host)
	after, err := os.ReadFile(filepath.Join(f.w.Dir, "trials.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, before, after, "the refused resume changed nothing")

	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	w, run, err := store.OpenExisting(f.w.Dir)
	require.NoError(t, err, "the lock died with its holder")
	require.NoError(t, w.Close())
	assert.Len(t, run.Trials, 1)
}

// TestResumeRefusesAChangedParent: the manifest records every file of the
// extends chain with its sha256; a parent edited after the run started makes
// --resume refuse, naming that file (issue 21, defect 6; issue 19, 4).
func TestResumeRefusesAChangedParent(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "studies", "base.yaml")
	child := writeStudy(t, dir, "name: child\nextends: base.yaml\nsweep: {strategy: grid, knobs: {micro_batch: [1, 2]}}\n")
	require.NoError(t, os.WriteFile(base, []byte("name: base\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 1}\n"), 0o644))
	s, plan := loadPlan(t, child)
	man := NewManifest("r1", s, plan, &Machine{Device: "cpu"}, nil, nil, nil)
	require.Len(t, man.Sources, 2)
	assert.Equal(t, child, man.Sources[0].Path)
	assert.Equal(t, base, man.Sources[1].Path)
	run := &store.Run{Dir: "RUN", Manifest: *man}
	require.NoError(t, CheckResume(run, s), "nothing changed")

	require.NoError(t, os.WriteFile(base, []byte("name: base\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 9}\n"), 0o644))
	s2, _ := loadPlan(t, child)
	err := CheckResume(run, s2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), base+" (extended by "+child+") changed since RUN started")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "studies", "other.yaml"), []byte("name: base\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 1}\n"), 0o644))
	require.NoError(t, os.WriteFile(child, []byte("name: child\nextends: other.yaml\nsweep: {strategy: grid, knobs: {micro_batch: [1, 2]}}\n"), 0o644))
	s3, _ := loadPlan(t, child)
	err = CheckResume(run, s3)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "changed since RUN started")
}

// TestCommitOnFullDisk: a record that cannot be committed stops the sweep
// with exit status 3 (README: the environment), and the records committed
// before stay intact (issue 21, defect 12).
func TestCommitOnFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; store's tests cover the logic on a fake device")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	writeStudy(t, mnt, repeatStudy)
	f := loadFixture(t, mnt, nil)
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	require.NoError(t, err)
	for err == nil {
		_, err = filler.Write(make([]byte, 4096))
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	filler.Close()

	r, err := New(f.options())
	require.NoError(t, err)
	_, err = r.Run(context.Background())
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err))
	assert.Contains(t, err.Error(), "the trials committed before are intact")
	recs, err := store.ReadTrials(filepath.Join(f.w.Dir, "trials.jsonl"))
	require.NoError(t, err)
	assert.Empty(t, recs)
}

// TestManifestRecordsTheCompareBaseline: compare.baseline inherited through
// extends, relative to the file that set it, recorded absolute, so that
// `casestudy compare NEW` finds it from any folder.
func TestManifestRecordsTheCompareBaseline(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "studies", "base.yaml")
	child := writeStudy(t, dir, "name: child\nextends: base.yaml\nsweep: {strategy: grid, knobs: {micro_batch: [1, 2]}}\n")
	require.NoError(t, os.WriteFile(base, []byte("name: base\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 1}\n"+
		"compare: {baseline: nightly.baseline.json}\n"), 0o644))
	s, plan := loadPlan(t, child)
	man := NewManifest("r1", s, plan, &Machine{Device: "cpu"}, nil, nil, nil)
	assert.Equal(t, filepath.Join(dir, "studies", "nightly.baseline.json"), man.CompareBaseline)
	assert.True(t, filepath.IsAbs(man.CompareBaseline))
}
