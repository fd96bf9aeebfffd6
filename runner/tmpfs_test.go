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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
)

// TestInodesRunOutMidSweep (audit N7, S-4; *root*): the results folder, a
// tmpfs, runs out of inodes after the first trial; the sweep stops with exit
// status 3 and the cut trial is interrupted; with inodes again, --resume runs
// every remaining trial (it used to commit them all failed and rerun none).
func TestInodesRunOutMidSweep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	writeStudy(t, dir, strings.NewReplacer("micro_batch: [1, 2]", "micro_batch: [1, 2, 3]", "repeats: 2", "repeats: 1").Replace(repeatStudy))
	mnt := filepath.Join(dir, "results")
	require.NoError(t, os.MkdirAll(mnt, 0o755))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,nr_inodes=1000", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	f := loadFixture(t, dir, nil)
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(mnt, &st))
	used := st.Files - st.Ffree
	// the first trial's logs folder, its folder and one rank's log: then none
	if out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,nr_inodes=%d", used+3), mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot limit the tmpfs's inodes: %v %s", err, out)
	}
	run, err := f.run(t, context.Background(), f.options())
	require.Error(t, err)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err), err.Error())
	outcomes := map[store.Outcome]int{}
	for _, tr := range run.Trials {
		outcomes[tr.Outcome]++
	}
	assert.Equal(t, 1, outcomes[store.OK], "%v", outcomes)
	assert.Zero(t, outcomes[store.Failed], "no trial failed for the storage's sake")

	require.NoError(t, exec.Command("mount", "-o", "remount,nr_inodes=1000", mnt).Run())
	resumed := resume(t, f)
	ok := map[string]bool{}
	for _, tr := range resumed.Trials {
		if tr.Outcome == store.OK {
			ok[tr.ID] = true
		}
	}
	assert.Len(t, ok, len(f.plan.Trials))
}
