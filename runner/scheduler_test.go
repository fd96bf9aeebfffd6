package runner

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/store"
)

// verdictLauncher starts ranks locally and adds what a scheduler would say
// (launch.Slurm does this from srun's reports): the node of every rank and,
// for a rank that did not end cleanly, the scheduler's verdict.
type verdictLauncher struct {
	outcome, reason string
	grace           time.Duration // Deadline's extra time
}

func (v verdictLauncher) Start(ctx context.Context, spec launch.Spec) (launch.Group, error) {
	g, err := launch.Local{}.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	out := &verdictGroup{Group: g, exits: make(chan launch.Exit, len(spec.Ranks))}
	go func() {
		for e := range g.Exits() {
			e.Node = "node7"
			if e.Code != 0 || e.Killed() {
				e.Outcome, e.Reason = v.outcome, v.reason
			}
			out.exits <- e
		}
		close(out.exits)
	}()
	return out, nil
}

func (v verdictLauncher) Deadline(timeout time.Duration) time.Duration { return timeout + v.grace }

type verdictGroup struct {
	launch.Group
	exits chan launch.Exit
}

func (g *verdictGroup) Exits() <-chan launch.Exit { return g.exits }

const schedulerStudy = `name: runner-scheduler
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 16}
workload: {device: cpu, ranks: 2, warmup_steps: 1, steps: 3, repeats: 1, timeout: 1s}
baseline: {precision: fp32}
sweep:
  strategy: list
  trials:
    - {fault.kind: crash, fault.rank: 1, fault.at_step: 1}
    - {fault.kind: none}
`

// TestSchedulerVerdicts: a scheduler's verdict on a rank's end (Slurm: out of
// memory, node failure, time limit) becomes the trial's outcome with its
// reason, every rank records its node, and the next trial runs.
func TestSchedulerVerdicts(t *testing.T) {
	for _, tt := range []struct{ outcome, reason string }{
		{"oom", "Slurm: task 1 on node7 ran out of memory"},
		{"failed", "Slurm cancelled step 5.1 on node7: node failure"},
		{"timeout", "Slurm cancelled step 5.1 on node7: time limit"},
	} {
		t.Run(tt.outcome, func(t *testing.T) {
			f := newFixture(t, schedulerStudy)
			o := f.options()
			o.Launcher = verdictLauncher{outcome: tt.outcome, reason: tt.reason, grace: 20 * time.Second}
			run, err := f.run(t, context.Background(), o)
			require.NoError(t, err)
			recs := byID(run)
			crash := recs[idOf(t, f.plan, "crash")]
			assert.Equal(t, store.Outcome(tt.outcome), crash.Outcome)
			assert.Contains(t, crash.Error, tt.reason)
			if tt.outcome == "timeout" {
				assert.Contains(t, crash.Error, "last completed steps: rank0=")
			}
			ok := recs[idOf(t, f.plan, "none")]
			assert.Equal(t, store.OK, ok.Outcome, "the sweep goes on after a scheduler's verdict: %s", ok.Error)
			for _, r := range ok.Repeats[0].Ranks {
				assert.Equal(t, "node7", r.Node)
			}
		})
	}
}

// TestSchedulerDeadline: with a launcher whose scheduler enforces the trial's
// limit, the runner's own deadline is the launcher's later backstop.
func TestSchedulerDeadline(t *testing.T) {
	f := newFixture(t, schedulerStudy)
	f.plan.Trials[0].Knobs["fault.kind"] = "hang"
	f.plan.Trials = f.plan.Trials[:1]
	o := f.options()
	o.Launcher = verdictLauncher{grace: 1500 * time.Millisecond}
	start := time.Now()
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, run.Trials, 1)
	assert.Equal(t, store.Timeout, run.Trials[0].Outcome)
	assert.GreaterOrEqual(t, time.Since(start), 2500*time.Millisecond, "1 s timeout + 1.5 s backstop")
}
