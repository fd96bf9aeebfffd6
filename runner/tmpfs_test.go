package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/internal/testfs"
	"github.com/casestudy/casestudy/store"
)

// TestInodesRunOutMidSweep (audit N7, S-4; *root*): the results folder, a
// tmpfs, runs out of inodes after the first trial; the sweep stops with exit
// status 3 and the cut trial is interrupted; with inodes again, --resume runs
// every remaining trial (it used to commit them all failed and rerun none).
func TestInodesRunOutMidSweep(t *testing.T) {
	dir := t.TempDir()
	mnt := testfs.Tmpfs(t, filepath.Join(dir, "results"), "size=64m,nr_inodes=1000")
	writeStudy(t, dir, strings.NewReplacer("micro_batch: [1, 2]", "micro_batch: [1, 2, 3]", "repeats: 2", "repeats: 1").Replace(repeatStudy))
	f := loadFixture(t, dir, nil)
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(mnt, &st))
	used := st.Files - st.Ffree
	// the first trial's logs folder, its folder and one rank's log: then none
	if err := testfs.Remount(mnt, fmt.Sprintf("nr_inodes=%d", used+3)); err != nil {
		t.Skipf("cannot limit the tmpfs's inodes: %v", err)
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

	require.NoError(t, testfs.Remount(mnt, "nr_inodes=1000"))
	resumed := resume(t, f)
	ok := map[string]bool{}
	for _, tr := range resumed.Trials {
		if tr.Outcome == store.OK {
			ok[tr.ID] = true
		}
	}
	assert.Len(t, ok, len(f.plan.Trials))
}
