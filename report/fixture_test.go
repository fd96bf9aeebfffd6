package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	meas "github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
)

var update = flag.Bool("update", false, "rewrite testdata fixtures and golden files")

// The fixtures are crafted run directories (testdata/runs, testdata/history):
// made by the code below with fixed seeds and times, committed, and checked
// against it so they cannot drift. Regenerate with go test ./report -update.

// fixTrial is one crafted trial: its knobs, outcome and true throughput.
type fixTrial struct {
	knobs   map[string]string
	outcome store.Outcome
	err     string
	tput    float64 // true median samples/s (all ranks)
	noise   float64 // relative sd
}

type fixRun struct {
	study, runID string
	created      time.Time
	seed         uint64
	repeats      int
	ranks        int
	steps        int
	batch        int // samples per rank per step
	pipeline     bool
	baseline     map[string]string
	sweepOrder   []string            // knobs in the study's sweep order
	strategy     string              // sweep.strategy; "" = grid
	values       map[string][]string // the values the study lists per knob ("[...]" when absent)
	trials       []fixTrial
	dropped      []store.DroppedTrial // in the manifest
	// droppedRecs are committed as the runner does (runner.commitDropped):
	// records with outcome skipped, outside the plan.
	droppedRecs  []store.DroppedTrial
	planned      int    // trials in the manifest's plan (a greedy sweep plans round 1 only); 0 = all
	batchIsMicro bool   // a step processes micro_batch samples per rank (else batch)
	topo, cudnn  string // the manifest's topology matrix and cuDNN version, when not the default
}

// studyText is a study file's text with the sweep in the fixture's order.
func (f fixRun) studyText() string {
	strategy := f.strategy
	if strategy == "" {
		strategy = "grid"
	}
	text := "name: " + f.study + "\nsweep:\n  strategy: " + strategy + "\n  knobs:\n"
	for _, k := range f.sweepOrder {
		list := "[...]"
		if v, ok := f.values[k]; ok {
			list = "[" + strings.Join(v, ", ") + "]"
		}
		text += "    " + k + ": " + list + "\n"
	}
	return text
}

func fixID(knobs map[string]string) string {
	var b []byte
	for _, k := range sortedKeys((knobs)) {
		b = fmt.Appendf(b, "%s=%s;", k, knobs[k])
	}
	var h uint32 = 2166136261
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return fmt.Sprintf("t-%08x", h)
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func (f fixRun) run() *store.Run {
	r := rand.New(rand.NewPCG(f.seed, 42))
	topo, cudnn := "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X ", "9.1.0"
	if f.topo != "" {
		topo = f.topo
	}
	if f.cudnn != "" {
		cudnn = f.cudnn
	}
	m := store.Manifest{
		Schema: store.SchemaVersion, RunID: f.runID, Study: f.study,
		StudyPath: "studies/bert/" + f.study + ".yaml", StudyText: f.studyText(),
		StudySHA256: "5f1c0e5a9d0b7c2e4f8a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e",
		Created:     f.created, Command: "casestudy run studies/bert/" + f.study + ".yaml",
		Tool:      store.Tool{Version: "0.1.0-test", Commit: "abc1234", Go: "go1.26"},
		Baseline:  f.baseline,
		Objective: store.Objective{Metric: "throughput", Goal: "max"},
		Workload:  map[string]any{"gpus": 8, "repeats": f.repeats, "steps": f.steps, "warmup_steps": 3},
		Model:     map[string]any{"family": "bert", "preset": "large"},
		Host: store.Host{Hostname: "gpu-node-01", OS: "linux", CPU: "Intel Xeon Platinum 8480+", CPUs: 224,
			Driver: "550.54.15", CUDADriver: "12.4", TopoMatrix: topo,
			GPUs: []store.GPU{{Index: 0, Name: "NVIDIA H200", MemBytes: 150 << 30}, {Index: 1, Name: "NVIDIA H200", MemBytes: 150 << 30}}},
		Engine:  &engine.BuildInfo{ABI: 1, Torch: "2.4.0", CUDA: "12.4", NCCL: "2.21.5", CuDNN: cudnn, CUDAAvailable: true, DeviceCount: 8},
		Env:     map[string]string{"NCCL_DEBUG": "INFO"},
		Dropped: f.dropped, CompareThreshold: 0.05,
	}
	run := &store.Run{Manifest: m}
	start := f.created
	for i, ft := range f.trials {
		id := fixID(ft.knobs)
		var changed []string
		for _, k := range sortedKeys((ft.knobs)) {
			if f.baseline[k] != ft.knobs[k] {
				changed = append(changed, k)
			}
		}
		if changed == nil {
			changed = []string{}
		}
		if f.planned == 0 || i < f.planned {
			run.Manifest.Plan = append(run.Manifest.Plan, store.PlannedTrial{ID: id, Index: i, Knobs: ft.knobs, Changed: changed})
		}
		rec := store.TrialRecord{Schema: store.SchemaVersion, ID: id, Index: i, Knobs: ft.knobs, Changed: changed,
			Outcome: ft.outcome, Error: ft.err, Attempts: 1, Started: start, FailedRank: -1,
			Command: fmt.Sprintf("casestudy run studies/bert/%s.yaml --trial %s", f.study, id)}
		if ft.outcome == store.OK {
			for rep := range f.repeats {
				rec.Repeats = append(rec.Repeats, f.repeat(r, rep, ft))
			}
			rec.Summary = meas.SummarizeTrial(rec.Repeats, meas.SummaryOptions{})
		} else if ft.outcome != store.Skipped && ft.outcome != store.Unsupported {
			rec.Repeats = []store.RepeatRecord{{Repeat: 0, Outcome: ft.outcome, Error: ft.err}}
		}
		start = start.Add(3 * time.Minute)
		rec.Finished = start.Add(-10 * time.Second)
		run.Trials = append(run.Trials, rec)
	}
	for i, d := range f.droppedRecs {
		run.Trials = append(run.Trials, store.TrialRecord{Schema: store.SchemaVersion, ID: runner.DroppedID(d.Knobs), Index: -1 - len(f.trials) - i,
			Knobs: d.Knobs, Outcome: store.Skipped, Error: d.Reason, FailedRank: -1, Started: start, Finished: start})
	}
	return run
}

func (f fixRun) repeat(r *rand.Rand, rep int, ft fixTrial) store.RepeatRecord {
	// a repeat has its own level (run-to-run variance), steps jitter around it
	level := ft.tput * (1 + ft.noise*r.NormFloat64())
	out := store.RepeatRecord{Repeat: rep, Outcome: store.OK}
	mb, _ := fmtAtoi(ft.knobs["micro_batch"])
	batch := f.batch
	if f.batchIsMicro && mb > 0 {
		batch = mb
	}
	stepMS := 1000 * float64(batch*f.ranks) / level
	for rk := range f.ranks {
		rr := store.RankRecord{Rank: rk, GPU: fmt.Sprint(rk), WarmupSteps: 3, LastStep: 3 + f.steps - 1}
		for s := range f.steps {
			ms := stepMS * (1 + 0.01*r.NormFloat64())
			sm := engine.StepMetrics{Step: 3 + s, Loss: 7.5 - 0.05*float64(s), StepMS: ms,
				ForwardMS: 0.3 * ms, BackwardMS: 0.52 * ms, OptimizerMS: 0.06 * ms, CommMS: 0.12 * ms,
				ExposedCommMS: 0.05 * ms, Samples: batch, Tokens: batch * 512,
				SamplesPerS: float64(batch) / (ms / 1000), TokensPerS: float64(batch*512) / (ms / 1000),
				MemPeakBytes: int64(12+mb/4) << 30, MemReservedBytes: int64(13+mb/4) << 30}
			if f.pipeline {
				sm.BubbleMS = 0.08 * ms
				sm.ForwardMS, sm.BackwardMS = 0.26*ms, 0.48*ms
			}
			sm.TFLOPS = 0.038 * level / float64(f.ranks)       // model TFLOP/s per GPU
			sm.MFU = sm.TFLOPS / peakAt[ft.knobs["precision"]] // the engine's: against its precision's peak
			rr.Steps = append(rr.Steps, sm)
		}
		out.Ranks = append(out.Ranks, rr)
	}
	out.SamplesPerS, out.TokensPerS = meas.Throughput(out.Ranks)
	out.Summary = meas.SummarizeRepeat(&out)
	return out
}

// peakAt is the H200's dense peak TFLOP/s per precision (engine/native/src/device.cpp).
var peakAt = map[string]float64{"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9, "": 989.4}

func fmtAtoi(s string) (int, error) {
	var v int
	_, err := fmt.Sscan(s, &v)
	return v, err
}

var t0 = time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)

func knobs(precision, mb string) map[string]string {
	return map[string]string{"precision": precision, "micro_batch": mb, "ddp.bucket_mb": "25"}
}

// gridRun is a BERT grid: precision × micro_batch, 6 repeats, one noisy
// trial, an OOM, an unsupported setting and a dropped combination. slowdown
// scales one trial's throughput (for compare and history fixtures).
func gridRun(runID string, created time.Time, seed uint64, slowdown map[string]float64) fixRun {
	tp := func(p, mb string) float64 {
		v := 1000.0
		if p == "bf16" {
			v *= 1.62
		}
		v *= map[string]float64{"16": 1, "32": 1.12, "64": 1.17}[mb]
		if s, ok := slowdown[p+"/"+mb]; ok {
			v *= s
		}
		return v
	}
	return fixRun{study: "bert-grid", runID: runID, created: created, seed: seed, repeats: 6, ranks: 1, steps: 5, batch: 16,
		baseline: knobs("fp32", "16"), sweepOrder: []string{"precision", "micro_batch"},
		trials: []fixTrial{
			{knobs: knobs("fp32", "16"), outcome: store.OK, tput: tp("fp32", "16"), noise: 0.01},
			{knobs: knobs("fp32", "32"), outcome: store.OK, tput: tp("fp32", "32"), noise: 0.01},
			{knobs: knobs("fp32", "64"), outcome: store.OOM, err: "CUDA out of memory. Tried to allocate 3.00 GiB (GPU 0; 139.8 GiB total capacity)"},
			{knobs: knobs("bf16", "16"), outcome: store.OK, tput: tp("bf16", "16"), noise: 0.08},
			{knobs: knobs("bf16", "32"), outcome: store.OK, tput: tp("bf16", "32"), noise: 0.01},
			{knobs: knobs("bf16", "64"), outcome: store.OK, tput: tp("bf16", "64"), noise: 0.012},
			{knobs: knobs("fp16", "16"), outcome: store.Unsupported, err: "precision fp16: <script>alert(1)</script> dynamic loss scaling is not built into this engine"},
		},
		dropped: []store.DroppedTrial{{Knobs: knobs("fp16", "64"), Reason: "constraint micro_batch <= 32 when precision == fp16"}},
	}
}

func gptKnobs(precision, mb, graphs string) map[string]string {
	return map[string]string{"precision": precision, "micro_batch": mb, "graphs": graphs, "seq_len": "512"}
}

// oatRun is a one-at-a-time GPT sweep as the issue saw it: powers of two of
// micro_batch (one OOM), three precisions, graphs; two combinations dropped,
// recorded both in the manifest and as skipped records (as the runner does);
// a topology matrix with terminal escapes and cuDNN's integer version.
func oatRun() fixRun {
	return fixRun{study: "gpt-oat", runID: "20261130T050000Z-ffffff", created: t0.Add(3 * time.Hour), seed: 6,
		repeats: 6, ranks: 1, steps: 5, batchIsMicro: true, strategy: "one-at-a-time",
		baseline:   gptKnobs("bf16", "8", "false"),
		sweepOrder: []string{"precision", "micro_batch", "graphs"},
		values: map[string][]string{"precision": {"fp32", "tf32", "bf16", "fp16"}, "micro_batch": {"4", "8", "16", "32", "64", "128"},
			"graphs": {"false", "true"}},
		trials: []fixTrial{
			{knobs: gptKnobs("bf16", "8", "false"), outcome: store.OK, tput: 300, noise: 0.01},
			{knobs: gptKnobs("fp32", "8", "false"), outcome: store.OK, tput: 95, noise: 0.01},
			{knobs: gptKnobs("tf32", "8", "false"), outcome: store.OK, tput: 210, noise: 0.01},
			{knobs: gptKnobs("bf16", "4", "false"), outcome: store.OK, tput: 230, noise: 0.01},
			{knobs: gptKnobs("bf16", "16", "false"), outcome: store.OK, tput: 335, noise: 0.01},
			{knobs: gptKnobs("bf16", "32", "false"), outcome: store.OK, tput: 362, noise: 0.01},
			{knobs: gptKnobs("bf16", "64", "false"), outcome: store.OOM, err: "CUDA out of memory. Tried to allocate 12.00 GiB"},
			{knobs: gptKnobs("bf16", "8", "true"), outcome: store.OK, tput: 318, noise: 0.01},
		},
		dropped: oatDropped, droppedRecs: oatDropped,
		topo:  "\x1b[4m\tGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \tNV18\t0-47\nGPU1\tNV18\t X \t0-47\n",
		cudnn: "91900",
	}
}

var oatDropped = []store.DroppedTrial{
	{Knobs: map[string]string{"precision": "fp16"}, Reason: "precision fp16: this engine has no dynamic loss scaling for gpt"},
	{Knobs: map[string]string{"micro_batch": "128"}, Reason: "constraint \"micro_batch <= 64\" does not hold"},
}

// greedyRun is a greedy sweep: round 1 tunes micro_batch (32 wins), round 2
// graphs from there. Only round 1 is in the plan, as the planner writes it.
func greedyRun() fixRun {
	return fixRun{study: "gpt-greedy", runID: "20261130T060000Z-abcdef", created: t0.Add(4 * time.Hour), seed: 7,
		repeats: 6, ranks: 1, steps: 5, batchIsMicro: true, strategy: "greedy", planned: 3,
		baseline:   gptKnobs("bf16", "8", "false"),
		sweepOrder: []string{"micro_batch", "graphs"},
		values:     map[string][]string{"micro_batch": {"8", "16", "32"}, "graphs": {"false", "true"}},
		trials: []fixTrial{
			{knobs: gptKnobs("bf16", "8", "false"), outcome: store.OK, tput: 300, noise: 0.01},
			{knobs: gptKnobs("bf16", "16", "false"), outcome: store.OK, tput: 335, noise: 0.01},
			{knobs: gptKnobs("bf16", "32", "false"), outcome: store.OK, tput: 362, noise: 0.01},
			{knobs: gptKnobs("bf16", "32", "true"), outcome: store.OK, tput: 391, noise: 0.01},
		},
	}
}

func fixtures() map[string]fixRun {
	return map[string]fixRun{
		"runs/gpt-oat":           oatRun(),
		"runs/gpt-greedy":        greedyRun(),
		"runs/bert-grid":         gridRun("20261130T020000Z-aaaaaa", t0, 1, nil),
		"runs/bert-grid-rerun":   gridRun("20261201T020000Z-bbbbbb", t0.Add(24*time.Hour), 2, nil),
		"runs/bert-grid-slower":  gridRun("20261202T020000Z-cccccc", t0.Add(48*time.Hour), 3, map[string]float64{"bf16/32": 0.88}),
		"history/bert-grid/run1": gridRun("20261130T020000Z-aaaaaa", t0, 1, nil),
		"history/bert-grid/run2": gridRun("20261201T020000Z-bbbbbb", t0.Add(24*time.Hour), 2, map[string]float64{"bf16/32": 0.96}),
		"history/bert-grid/run3": gridRun("20261202T020000Z-cccccc", t0.Add(48*time.Hour), 3, map[string]float64{"bf16/32": 0.91}),
		"runs/gpt-pipeline": {study: "gpt-pipeline", runID: "20261130T030000Z-dddddd", created: t0.Add(time.Hour), seed: 4,
			repeats: 1, ranks: 2, steps: 24, batch: 8, pipeline: true,
			baseline:   map[string]string{"pipeline.schedule": "gpipe", "pipeline.microbatches": "4"},
			sweepOrder: []string{"pipeline.schedule", "pipeline.microbatches"},
			trials: []fixTrial{
				{knobs: map[string]string{"pipeline.schedule": "gpipe", "pipeline.microbatches": "4"}, outcome: store.OK, tput: 400, noise: 0},
				{knobs: map[string]string{"pipeline.schedule": "1f1b", "pipeline.microbatches": "4"}, outcome: store.OK, tput: 452, noise: 0},
				{knobs: map[string]string{"pipeline.schedule": "1f1b", "pipeline.microbatches": "8"}, outcome: store.OK, tput: 498, noise: 0},
				{knobs: map[string]string{"pipeline.schedule": "gpipe", "pipeline.microbatches": "8"}, outcome: store.Timeout, err: "rank 1 sent no heartbeat for 60s (last completed step 7)"},
			}},
		"runs/all-failed": {study: "bert-broken", runID: "20261130T040000Z-eeeeee", created: t0.Add(2 * time.Hour), seed: 5,
			repeats: 3, ranks: 2, steps: 5, batch: 16, baseline: knobs("fp32", "16"),
			trials: []fixTrial{
				{knobs: knobs("fp32", "16"), outcome: store.Crashed, err: "rank 1 killed by signal SIGSEGV"},
				{knobs: knobs("bf16", "16"), outcome: store.Failed, err: "engine: NCCL error: unhandled system error"},
				{knobs: knobs("fp16", "16"), outcome: store.Skipped, err: "known-bad combination: NCCL_PROTO=LL128 with NCCL_ALGO=Tree (nccl#786)"},
			}},
	}
}

func writeRun(t *testing.T, dir string, run *store.Run) {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	mb, err := json.MarshalIndent(run.Manifest, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), append(mb, '\n'), 0o644))
	var buf bytes.Buffer
	for _, rec := range run.Trials {
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		buf.Write(append(b, '\n'))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "trials.jsonl"), buf.Bytes(), 0o644))
}

// TestFixtures checks the committed fixtures against their generator (or
// rewrites them with -update).
func TestFixtures(t *testing.T) {
	for name, f := range fixtures() {
		dir := filepath.Join("testdata", name)
		if *update {
			writeRun(t, dir, f.run())
		}
		tmp := t.TempDir()
		writeRun(t, tmp, f.run())
		for _, file := range []string{"manifest.json", "trials.jsonl"} {
			want, err := os.ReadFile(filepath.Join(tmp, file))
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(dir, file))
			require.NoError(t, err, "run go test ./report -update")
			require.True(t, bytes.Equal(want, got), "%s/%s differs from its generator: go test ./report -update", dir, file)
		}
	}
}

// readFixture reads a committed fixture with store.ReadRun.
func readFixture(t *testing.T, name string) *store.Run {
	t.Helper()
	run, err := store.ReadRun(filepath.Join("testdata", name))
	require.NoError(t, err)
	return run
}
