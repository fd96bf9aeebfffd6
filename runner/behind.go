package runner

import (
	"fmt"
	"strings"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// behind names the rank a hung or failed collective waits for, from the
// communication progress each rank last sent in its heartbeats (engine's
// cs_comm_progress): every rank issues the same collectives in the same
// order, so the rank that issued the fewest has not reached the collective
// its peers wait in (a stalled kernel, a slow host, a dead peer), and among
// ranks that issued as many, the one that completed the fewest is the one
// whose collective is stuck. It answers -1 and "" when fewer than two ranks
// reported progress, and a sentence saying no rank is behind when every rank
// issued and completed as many; ranks that reported no progress are named as
// such (one of them may be the rank behind: "every rank" is said only when
// all reported).
func behind(ranks []store.RankRecord) (int, string) {
	var have []store.RankRecord
	for _, r := range ranks {
		if r.Comm != nil {
			have = append(have, r)
		}
	}
	if len(have) < 2 {
		return -1, ""
	}
	low := have[0]
	same := true
	for _, r := range have[1:] {
		p, l := r.Comm, low.Comm
		if p.Issued != l.Issued || p.Completed != l.Completed {
			same = false
		}
		if p.Issued < l.Issued || (p.Issued == l.Issued && p.Completed < l.Completed) {
			low = r
		}
	}
	var silent []string
	for _, r := range ranks {
		if r.Comm == nil {
			silent = append(silent, fmt.Sprintf("%d", r.Rank))
		}
	}
	if same {
		p := low.Comm
		if len(silent) > 0 { // a rank that sent no progress may be the one behind: no "every rank"
			return -1, fmt.Sprintf("the %d ranks that reported issued %d collectives and completed %d (step %d, %s); "+
				"rank %s reported no communication progress", len(have), p.Issued, p.Completed, p.Step, bucketText(p),
				strings.Join(silent, ", "))
		}
		return -1, fmt.Sprintf("no rank is behind: every rank issued %d collectives and completed %d (step %d, %s)",
			p.Issued, p.Completed, p.Step, bucketText(p))
	}
	parts := make([]string, 0, len(have))
	for _, r := range have {
		parts = append(parts, fmt.Sprintf("rank%d=%d/%d", r.Rank, r.Comm.Completed, r.Comm.Issued))
	}
	for _, r := range silent {
		parts = append(parts, "rank"+r+"=no progress reported")
	}
	p := low.Comm
	return low.Rank, fmt.Sprintf("rank %d is behind: it issued %d collectives and completed %d, at step %d, %s "+
		"(completed/issued per rank: %s)", low.Rank, p.Issued, p.Completed, p.Step, bucketText(p), strings.Join(parts, " "))
}

func bucketText(p *engine.CommProgress) string {
	if p.Bucket < 0 {
		return "before its first bucket"
	}
	return fmt.Sprintf("last bucket launched %d", p.Bucket)
}

// commDeadlineMS is the collective deadline (dist.timeout_ms) a rank's
// engine starts with: the study's workload.timeout and 30 s more, at most 10
// minutes. It covers communicator set-up and the first steps (cuDNN
// autotuning, lazy initialisation), whose length nothing knows yet; past the
// launch's own limit, so that a rank stuck before the warm step is ended by
// that limit (the runner's timeout, or Slurm's --time) and recorded as a
// timeout, not as its peers' failed collective. The warm step then lowers
// it (warmDeadlineMS).
func commDeadlineMS(workloadTimeoutMS int64) int {
	const ceiling = 10 * 60 * 1000
	const margin = 30 * 1000
	if workloadTimeoutMS <= 0 || workloadTimeoutMS+margin > ceiling {
		return ceiling
	}
	return int(workloadTimeoutMS + margin)
}

// warmDeadlineMS is the deadline once the step time is known:
// max(60 s, 5 × the warm step), where that is shorter than the trial's own
// timeout (the initial deadline less its 30 s margin); otherwise the initial
// one stays, so the launch's limit (the runner's, or Slurm's --time) still
// ends a hang first and records it as a timeout.
func warmDeadlineMS(warmStepMS float64, initialMS int) int {
	ms := max(60000, int(5*warmStepMS))
	if ms >= initialMS-30000 {
		return initialMS
	}
	return ms
}
