package checklist

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

const mib = 1 << 20

func TestBucketSize(t *testing.T) {
	small := spec{id: "b25", ranks: 4, thr: 100, stepMS: 100, step: dpSteps(60, 25*mib/6, 20, 30, 10)}
	runCases(t, "bucket-size", []ruleCase{
		{name: "larger buckets measured faster", status: Finding,
			run: mkRun([]spec{small, {id: "b100", set: set("ddp.bucket_mb", "100"), ranks: 4, thr: 120, stepMS: 83,
				step: dpSteps(4, 100*mib, 80, 12, 3)}}),
			contains: []string{"ddp.bucket_mb: 100 was 1.20× faster than the baseline's 25", "too small", "use ddp.bucket_mb: 100"},
			trials:   []string{"b25", "b100"}},
		{name: "smaller buckets measured faster", status: Finding,
			run: mkRun([]spec{{id: "b25", ranks: 4, thr: 100, stepMS: 100, step: dpSteps(1, 25*mib, 80, 30, 25)},
				{id: "b5", set: set("ddp.bucket_mb", "5"), ranks: 4, thr: 115, stepMS: 87, step: dpSteps(5, 5*mib, 60, 30, 8)}}),
			contains: []string{"too large", "use ddp.bucket_mb: 5"}},
		{name: "no bucket size beats the baseline", status: Pass,
			run: mkRun([]spec{{id: "b25", ranks: 4, thr: 100, stepMS: 100, step: dpSteps(4, 25*mib, 80, 30, 2)},
				{id: "b100", set: set("ddp.bucket_mb", "100"), ranks: 4, thr: 101, stepMS: 99, step: dpSteps(1, 100*mib, 85, 30, 20)}}),
			contains: []string{"no bucket size beat"}},
		{name: "many slow buckets without a pair", status: Finding,
			run: mkRun([]spec{{id: "b1", set: set("ddp.bucket_mb", "1"), ranks: 4, thr: 90, stepMS: 110, step: dpSteps(100, mib, 10, 40, 20)},
				{id: "other", set: set("ddp.bucket_mb", "1", "micro_batch", "4"), ranks: 4, thr: 50, stepMS: 110, step: dpSteps(2, 60*mib, 80, 40, 20)}}),
			contains: []string{"100 all-reduces per step", "too small"}, trials: []string{"b1"}},
		{name: "one big bucket exposed", status: Finding,
			run:      mkRun([]spec{{id: "big", set: set("ddp.bucket_mb", "1000"), ranks: 4, thr: 90, stepMS: 100, step: dpSteps(1, 500*mib, 80, 30, 30)}}),
			contains: []string{"one bucket per step", "lower ddp.bucket_mb below 1000"}},
		{name: "healthy buckets", status: Pass,
			run: mkRun([]spec{{id: "a", ranks: 4, thr: 90, stepMS: 100, step: dpSteps(8, 25*mib, 80, 30, 3)}})},
		{name: "single rank", status: NotApplicable,
			run: mkRun([]spec{{id: "a", thr: 90, stepMS: 100}}), contains: []string{"no completed data-parallel trial"}},
	})
}

func TestExposedComm(t *testing.T) {
	runCases(t, "exposed-comm", []ruleCase{
		{name: "a third of the step exposed", status: Finding,
			run:      mkRun([]spec{{id: "a", ranks: 2, thr: 90, stepMS: 100, step: dpSteps(4, 25*mib, 40, 40, 33)}}),
			contains: []string{"33.0% of the best data-parallel trial's step", "tune ddp.bucket_mb"}, trials: []string{"a"}},
		{name: "overlap off", status: Finding,
			run:      mkRun([]spec{{id: "a", set: set("ddp.overlap", "false"), ranks: 2, thr: 90, stepMS: 100, step: dpSteps(4, 25*mib, 40, 40, 40)}}),
			contains: []string{"use ddp.overlap: true"}},
		{name: "threshold raised", status: Pass,
			run: mkRun([]spec{{id: "a", ranks: 2, thr: 90, stepMS: 100, step: dpSteps(4, 25*mib, 40, 40, 33)}}),
			cfg: Config{Thresholds: map[string]map[string]float64{"exposed-comm": {"max_exposed_frac": 0.4}}}},
		{name: "hidden", status: Pass,
			run:      mkRun([]spec{{id: "a", ranks: 2, thr: 90, stepMS: 100, step: dpSteps(4, 25*mib, 40, 40, 4)}}),
			contains: []string{"90.0% of 40 ms communication hidden"}},
		{name: "no communication measured", status: NotApplicable,
			run: mkRun([]spec{{id: "a", ranks: 2, thr: 90, stepMS: 100}})},
	})
}

func TestOverlapDisabled(t *testing.T) {
	off := set("ddp.overlap", "false")
	runCases(t, "overlap-disabled", []ruleCase{
		{name: "baseline off, no pair", status: Finding,
			run: mkRun([]spec{{id: "a", set: off, ranks: 2, thr: 90, stepMS: 100, step: dpSteps(4, 25*mib, 40, 30, 30)}},
				withBaseline("ddp.overlap", "false")),
			contains: []string{"exposing 30 ms of a 100 ms step", "use ddp.overlap: true"}},
		{name: "best off while on was faster", status: Finding,
			run: mkRun([]spec{{id: "on", ranks: 2, thr: 130, stepMS: 77}, {id: "off", set: off, ranks: 2, thr: 100, stepMS: 100}},
				withBaseline("ddp.overlap", "false")),
			contains: []string{"overlap on was 1.30× faster"}, trials: []string{"on", "off"}},
		{name: "off measured faster", status: Pass,
			run: mkRun([]spec{{id: "on", ranks: 2, thr: 90, stepMS: 110}, {id: "off", set: off, ranks: 2, thr: 100, stepMS: 100}},
				withBaseline("ddp.overlap", "false")),
			contains: []string{"overlap off was measured faster"}},
		{name: "on everywhere", status: Pass,
			run: mkRun([]spec{{id: "on", ranks: 2, thr: 130, stepMS: 77}, {id: "off", set: off, ranks: 2, thr: 100, stepMS: 100}})},
		{name: "single rank", status: NotApplicable, run: mkRun([]spec{{id: "a", set: off, thr: 90, stepMS: 100}})},
	})
}

func TestNCCLForced(t *testing.T) {
	b := func(id string, kv []string, thr float64) spec {
		return spec{id: id, set: set(kv...), ranks: 8, thr: thr, stepMS: 1000 / thr, step: dpSteps(4, 25*mib, 100, 10, 2)}
	}
	runCases(t, "nccl-forced", []ruleCase{
		{name: "forced Tree in the baseline is slower", status: Finding, severity: Warning,
			run:      mkRun([]spec{b("auto", nil, 100), b("tree", []string{"nccl.algo", "Tree"}, 80)}, withBaseline("nccl.algo", "Tree")),
			contains: []string{"forcing NCCL_ALGO=Tree was 1.25× slower than auto", "leave nccl.algo: auto", "median bucket 25.0 MiB over 8 ranks"},
			trials:   []string{"auto", "tree"}},
		{name: "forced protocol faster: say so with the caveat", status: Finding, severity: Info,
			run:      mkRun([]spec{b("auto", nil, 100), b("ll128", []string{"nccl.proto", "LL128"}, 110)}),
			contains: []string{"NCCL_PROTO=LL128 was 1.10× faster than auto", "at this message size", "re-measure"}},
		{name: "forced slower but not in use", status: Pass,
			run: mkRun([]spec{b("auto", nil, 100), b("tree", []string{"nccl.algo", "Tree"}, 80)})},
		{name: "launch-to-launch noise hides the gain", status: Pass,
			run: mkRun([]spec{noisy(b("auto", nil, 100), 0.1), noisy(b("ll128", []string{"nccl.proto", "LL128"}, 110), 0.1)})},
		{name: "nothing forced", status: NotApplicable,
			run: mkRun([]spec{b("auto", nil, 100)}), contains: []string{"no completed trial forcing"}},
	})
}

func TestNoEffectReadsNCCLLog(t *testing.T) {
	b := func(id string, kv []string, thr float64) spec {
		return spec{id: id, set: set(kv...), ranks: 2, thr: thr, stepMS: 1000 / thr, step: dpSteps(4, 25*mib, 100, 10, 2)}
	}
	run := mkRun([]spec{noisy(b("auto", nil, 100), 0.01), noisy(b("ring", []string{"nccl.algo", "Ring"}, 100.5), 0.01)})
	run.Dir = t.TempDir()
	log := filepath.Join(run.Dir, store.LogName("auto", 0, 0))
	require.NoError(t, os.MkdirAll(filepath.Dir(log), 0o755))
	require.NoError(t, os.WriteFile(log, []byte(
		"host:1:1 [0] NCCL INFO AllReduce: 26214400 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..3}\n"+
			"host:1:1 [0] NCCL INFO AllReduce: 26214400 Bytes -> Algo 1 proto 2 time 41.2\n"), 0o644))
	res := evalOne(t, run, "no-effect-knob", Config{})
	require.Equal(t, Finding, res.Status, res.Message)
	require.Contains(t, res.Evidence[0], "NCCL's log shows auto already chose RING for all 2 all-reduces of auto")
}

func TestNCCLForcedFasterQuotesNCCLLog(t *testing.T) {
	b := func(id string, kv []string, thr float64) spec {
		return spec{id: id, set: set(kv...), ranks: 8, thr: thr, stepMS: 1000 / thr, step: dpSteps(4, 25*mib, 100, 10, 2)}
	}
	run := mkRun([]spec{b("auto", nil, 100), b("ring", []string{"nccl.algo", "Ring"}, 112)})
	run.Dir = t.TempDir()
	log := filepath.Join(run.Dir, store.LogName("auto", 0, 1))
	require.NoError(t, os.MkdirAll(filepath.Dir(log), 0o755))
	require.NoError(t, os.WriteFile(log, []byte("h:1:1 [0] NCCL INFO AllReduce: 26214400 Bytes -> Algo TREE proto LL128 channel{Lo..Hi}={0..1}\n"), 0o644))
	res := evalOne(t, run, "nccl-forced", Config{})
	require.Equal(t, Finding, res.Status, res.Message)
	require.Equal(t, Info, res.Severity)
	require.Contains(t, res.Evidence, "with auto, NCCL chose algo TREE×1, proto LL128×1 for 1 all-reduces (rank 0's log of auto)")
	// a 12% difference is an effect: no-effect-knob does not claim otherwise
	require.Equal(t, Pass, evalOne(t, run, "no-effect-knob", Config{}).Status)
}
