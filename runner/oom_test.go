package runner

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// TestKernelOOMKillIsOOM: a rank SIGKILLed while the kernel's OOM-kill count
// went up is recorded oom, with the count in the message; the same SIGKILL
// with the count unchanged is a crash (issue 21, defect 9). The count is
// injected here; cmd/casestudy's TestRealOOMKillIsOOM lets the kernel do it.
func TestKernelOOMKillIsOOM(t *testing.T) {
	for _, tc := range []struct {
		name  string
		step  uint64 // what the count grows by per reading
		want  store.Outcome
		inMsg string
	}{
		{"OOM killer fired", 1, store.OOM, "the kernel's OOM killer ended 1 process(es) during the launch (/proc/vmstat oom_kill 7 → 8)"},
		{"no OOM kill", 0, store.Crashed, "rank 1 was killed by SIGKILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, `name: oom-kill
model: {family: gpt, preset: tiny}
workload: {device: cpu, ranks: 2, warmup_steps: 0, steps: 3, timeout: 30s}
sweep: {strategy: list, trials: [{fault.kind: crash, fault.rank: 1, fault.at_step: 1}]}
`)
			o := f.options()
			var n atomic.Uint64
			n.Store(7)
			o.OOMKills = func() (uint64, bool) { return n.Add(tc.step) - tc.step, true }
			run, err := f.run(t, context.Background(), o)
			require.NoError(t, err)
			require.Len(t, run.Trials, 1)
			tr := run.Trials[0]
			assert.Equal(t, tc.want, tr.Outcome, tr.Error)
			assert.Equal(t, 1, tr.FailedRank)
			assert.Equal(t, "SIGKILL", tr.Signal)
			assert.Contains(t, tr.Error, tc.inMsg)
		})
	}
}
