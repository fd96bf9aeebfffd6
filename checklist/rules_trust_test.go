package checklist

import (
	"testing"

	"github.com/casestudy/casestudy/store"
)

func TestUntrustedLaunches(t *testing.T) {
	good := []spec{{id: "a", thr: 100, stepMS: 10}, {id: "b", set: set("graphs", "true"), thr: 110, stepMS: 9}}
	tainted := mkRun(good)
	tainted.Trials[1].Repeats[2].Tainted = "GPU 0 thermally throttled for 40% of the measured window"
	relaunched := mkRun(good) // a run of the launch schedule: one relaunch a trial
	relaunched.Manifest.Measurement = &store.Measurement{Repeats: 3, MaxRelaunches: 1}
	relaunched.Trials[1].Repeats[1].Tainted = "GPU 0 thermally throttled for 40% of the measured window"
	exhausted := mkRun(good)
	exhausted.Manifest.Measurement = &store.Measurement{Repeats: 3, MaxRelaunches: 1}
	exhausted.Trials[1].Repeats[1].Tainted = "GPU 0 thermally throttled for 40% of the measured window"
	exhausted.Trials[1].Repeats[2].Tainted = "GPU 0 thermally throttled for 30% of the measured window"
	runCases(t, "untrusted-launches", []ruleCase{
		{name: "every launch clean", status: Pass, run: mkRun(good), contains: []string{"every launch finished and measured cleanly (2 of 2 planned trial(s) measured)"}},
		{name: "a crashed trial", status: Finding, severity: Error,
			run:      mkRun(append(good, spec{id: "c", set: set("precision", "bf16"), outcome: store.Crashed, err: "rank 1 was killed by SIGSEGV\nstack"})),
			contains: []string{"1 of 3 planned trial(s) without numbers: c ended crashed: rank 1 was killed by SIGSEGV", "crashed: read the failing rank's log"},
			trials:   []string{"c"}},
		{name: "a timeout and an interrupted trial", status: Finding, severity: Error,
			run: mkRun(append(good, spec{id: "t", set: set("micro_batch", "32"), outcome: store.Timeout},
				spec{id: "i", set: set("micro_batch", "4"), outcome: store.Interrupted})),
			contains: []string{"2 of 4 planned trial(s) without numbers", "i ended interrupted", "casestudy run --resume"}, trials: []string{"t", "i"}},
		{name: "a tainted launch", status: Finding, severity: Error, run: tainted,
			contains: []string{"1 tainted launch(es): b launch 2 tainted (left out of the statistics, not launched again): GPU 0 thermally throttled"},
			trials:   []string{"b"}},
		{name: "a tainted launch the runner launched again", status: Pass, run: relaunched,
			contains: []string{"1 tainted launch(es) were launched again"}},
		{name: "more tainted launches than relaunches", status: Finding, severity: Error, run: exhausted,
			contains: []string{"1 tainted launch(es): b launch 2 tainted"}, trials: []string{"b"}},
		{name: "out of memory and skipped are outcomes, not faults", status: Pass,
			run: mkRun(append(good, spec{id: "o", set: set("micro_batch", "64"), outcome: store.OOM},
				spec{id: "s", set: set("mps", "true"), outcome: store.Skipped}, spec{id: "u", set: set("mps", "true"), outcome: store.Unsupported}))},
		// A run that did not measure its plan fails `check --fail-on error`
		// (audit: a run whose last trials never ran passed with 0 findings).
		{name: "planned trials without a record never ran", status: Finding, severity: Error,
			run: withPlan(mkRun(good), spec{id: "late", set: set("micro_batch", "32")}),
			contains: []string{"1 of 3 planned trial(s) without numbers: late (micro_batch=32) was planned and never ran (no record in trials.jsonl)",
				"not run: finish the run with casestudy run --resume RUN_DIR"},
			trials: []string{"late"}},
		{name: "planned, not one record", status: Finding, severity: Error, run: withPlan(mkRun(nil), good...),
			contains: []string{"2 of 2 planned trial(s) without numbers: a (baseline) was planned and never ran"}, trials: []string{"a", "b"}},
		{name: "dropped combinations are no trials", status: Pass,
			run:      withPlan(mkRun(append(good, spec{id: "skipped-1", set: set("mps", "true"), outcome: store.Skipped}))),
			contains: []string{"(2 of 2 planned trial(s) measured; 1 combination(s) dropped before running, not counted)"}},
		{name: "no trials: nothing measured is an error", status: Finding, severity: Error, run: mkRun(nil),
			contains: []string{"measured nothing"}},
	})
}
