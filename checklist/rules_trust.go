package checklist

import (
	"fmt"
	"strings"

	"github.com/casestudy/casestudy/knobs"
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
			"planned, or misses configurations. A planned trial without a record (the run stopped before it) has no " +
			"numbers either, and a run without a single trial measured nothing. Out-of-memory trials and combinations " +
			"skipped by a constraint are outcomes of the configuration, not faults of the measurement.",
		Needs: []string{"trial outcomes and errors", "repeats[].tainted", "manifest measurement.max_relaunches", "manifest plan"},
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

// notRunAdvice is what to do about planned trials without a record.
const notRunAdvice = "finish the run with casestudy run --resume RUN_DIR (it runs the planned trials that have no record)"

// nothingMeasured is the finding of a run without a single trial record or
// planned trial: it measured nothing, which a gate must not pass.
func nothingMeasured() verdict {
	return verdict{
		Status:         Finding,
		Severity:       Error,
		Message:        "the run has no trial records and plans no trial: it measured nothing",
		Recommendation: "check that RUN_DIR is the run's directory (manifest.json and trials.jsonl), or run the study again",
	}
}

// plannedLabel is a planned trial's "ID (knob=value, ...)", as trial.label.
func plannedLabel(p store.PlannedTrial) string {
	if len(p.Changed) == 0 {
		return p.ID + " (baseline)"
	}
	return p.ID + " (" + knobs.Join(p.Knobs, p.Changed, ", ") + ")"
}

// notRunLine is the evidence line of a planned trial without a record.
func notRunLine(p store.PlannedTrial) string {
	return plannedLabel(p) + " was planned and never ran (no record in trials.jsonl)"
}

func checkUntrustedLaunches(c *evalContext) verdict {
	if len(c.run.trials()) == 0 && len(c.run.notRun) == 0 {
		return nothingMeasured()
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
	// Planned trials without a record have no numbers either (the report
	// lists them not_run): the study measured less than it planned.
	for _, p := range c.run.notRun {
		lines, trials = append(lines, notRunLine(p)), append(trials, p.ID)
		advise("not run: " + notRunAdvice)
	}
	lost, tainted, replaced := len(c.run.notRun), 0, 0
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
			return pass("every trial finished with its launches (%s); %d tainted launch(es) were launched again", c.run.measuredOf(), replaced)
		}
		return pass("every launch finished and measured cleanly (%s)", c.run.measuredOf())
	}
	var what []string
	if lost > 0 {
		what = append(what, fmt.Sprintf("%d of %d planned trial(s) without numbers", lost, c.run.planned()))
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
