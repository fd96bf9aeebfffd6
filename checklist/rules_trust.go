package checklist

import (
	"fmt"
	"strings"

	"github.com/casestudy/casestudy/store"
)

// Rules whose findings make a study's numbers untrustworthy or incomplete:
// severity error, so `casestudy check --fail-on error` gates on them.

var trustRules = []*Rule{
	{
		ID: "untrusted-launches", Title: "Launches that failed or measured nothing trustworthy", Chapter: 19, Severity: Error,
		Rationale: "A trial that failed, crashed, timed out or was interrupted has no numbers, and a launch tainted " +
			"during its measured window (a throttled GPU, ...) is left out of the statistics: unless the runner launched " +
			"it again (at most measurement.max_relaunches times a trial), the study compares fewer launches than it " +
			"planned, or misses configurations. Out-of-memory trials and combinations skipped by a constraint are " +
			"outcomes of the configuration, not faults of the measurement.",
		Needs: []string{"trial outcomes and errors", "repeats[].tainted", "manifest measurement.max_relaunches"},
		check: checkUntrustedLaunches,
	},
}

// lostOutcomes are the outcomes that leave a trial without its numbers
// through a fault of the run, with what to do.
var lostOutcomes = map[store.Outcome]string{
	store.Failed:      "read the error and the ranks' logs (logs/<trial>/), fix the cause and re-run the trial with its record's command",
	store.Crashed:     "read the failing rank's log (logs/<trial>/), fix the cause and re-run the trial",
	store.Timeout:     "raise workload.timeout if the trial was slow, or read the ranks' last steps and logs for a hang, then re-run it",
	store.Interrupted: "finish the run with casestudy run --resume RUN_DIR",
}

func checkUntrustedLaunches(c *evalContext) verdict {
	if len(c.run.all) == 0 {
		return na("the run has no trial records")
	}
	var lines, trials, recs []string
	seen := map[string]bool{}
	advise := func(r string) {
		if !seen[r] {
			seen[r] = true
			recs = append(recs, r)
		}
	}
	relaunches := 0 // tainted launches a trial got launched again (runs before relaunching: none)
	if m := c.run.run.Manifest.Measurement; m != nil {
		relaunches = m.MaxRelaunches
	}
	lost, tainted, replaced := 0, 0, 0
	for _, t := range c.run.all {
		if r, ok := lostOutcomes[t.rec.Outcome]; ok {
			lost++
			line := fmt.Sprintf("%s ended %s", t.ID, t.rec.Outcome)
			if e := firstLine(t.rec.Error); e != "" {
				line += ": " + e
			}
			lines, trials = append(lines, line), append(trials, t.ID)
			advise(string(t.rec.Outcome) + ": " + r)
			continue
		}
		n := 0
		for _, rp := range t.rec.Repeats {
			if rp.Tainted == "" {
				continue
			}
			if n++; n <= relaunches {
				replaced++ // the runner launched it again: the statistics lack nothing
				continue
			}
			tainted++
			lines = append(lines, fmt.Sprintf("%s launch %d tainted (left out of the statistics, not launched again): %s", t.ID, rp.Repeat, firstLine(rp.Tainted)))
			trials = append(trials, t.ID)
			advise("tainted: remove the cause (cooling, power cap, other jobs on the GPUs) and re-run the trial")
		}
	}
	if len(lines) == 0 {
		if replaced > 0 {
			return pass("every trial of the %d finished with its launches; %d tainted launch(es) were launched again", len(c.run.all), replaced)
		}
		return pass("every launch of the %d trial(s) finished and measured cleanly", len(c.run.all))
	}
	var what []string
	if lost > 0 {
		what = append(what, fmt.Sprintf("%d trial(s) without numbers", lost))
	}
	if tainted > 0 {
		what = append(what, fmt.Sprintf("%d tainted launch(es)", tainted))
	}
	return verdict{
		Status:         Finding,
		Message:        fmt.Sprintf("%s: %s", strings.Join(what, " and "), lines[0]),
		Evidence:       limit(lines, 10),
		Trials:         trials,
		Recommendation: strings.Join(recs, "; "),
	}
}
