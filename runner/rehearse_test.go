package runner

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// TestRehearseSpec: a rehearsal keeps the trial's ranks, layout and
// micro-batch, puts a multi-rank world on the host-staged backend and spreads
// the ranks round-robin over the GPUs present, where a measured run would
// refuse the trial for want of GPUs.
func TestRehearseSpec(t *testing.T) {
	s, p := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny, micro_batch: 3}\nworkload: {device: cuda, gpus: 4, nodes: 2}\n"+
		"baseline: {pipeline.stages: 2, nccl.algo: ring}\n")
	m := &Machine{Device: "cuda", GPUs: []string{"3", "5"}}
	measured, err := buildSpec(s, p.Trials[0], m)
	require.NoError(t, err)
	assert.Contains(t, measured.Unsupported, "needs 4 GPUs per node")

	m.Rehearse = true
	sp, err := buildSpec(s, p.Trials[0], m)
	require.NoError(t, err)
	assert.Empty(t, sp.Unsupported)
	assert.False(t, sp.NCCLEvidence, "no NCCL runs in a rehearsal")
	require.Equal(t, 8, sp.Ranks)
	assert.Equal(t, []string{"3", "5", "3", "5", "3", "5", "3", "5"}, sp.Devices)
	for r, c := range sp.Configs {
		assert.Equal(t, "gloo-staged", c.Dist.Backend)
		assert.Equal(t, 8, c.Dist.WorldSize)
		assert.Equal(t, r, c.Dist.Rank)
		assert.Equal(t, 3, c.MicroBatch)
		assert.Equal(t, max(1, runtime.NumCPU()/8), c.Threads, "the host's cores shared by its 8 ranks")
	}
	assert.Zero(t, measured.Configs[0].Threads, "a measured CUDA rank keeps the cores its affinity gives it")
	dp, stages, micro := layoutOf(sp)
	assert.Equal(t, [3]int{4, 2, 3}, [3]int{dp, stages, micro})
	assert.Equal(t, 4, ranksPerGPU(sp.Devices))

	na, notes := notApplicable(p.Trials[0].Knobs)
	assert.Equal(t, "Ring", na["nccl.algo"]) // canonical spelling
	require.Len(t, notes, 1, "only the forced knob gets a note: %v", notes)
	assert.Contains(t, notes[0], "nccl.algo=Ring not applicable to a rehearsal")
}

// TestReferenceConfig: the reference of a trial is one rank training its
// global batch: data parallel folds into the micro-batch, a pipeline's
// micro-batches into gradient accumulation.
func TestReferenceConfig(t *testing.T) {
	c := engine.Config{Family: "gpt", Preset: "tiny", MicroBatch: 2, GradAccum: 1, Precision: "bf16",
		Dist:     engine.DistConfig{Rank: 3, WorldSize: 8, Backend: engine.BackendStaged},
		Pipeline: engine.PipelineConfig{Stages: 2, Microbatches: 4, Schedule: "1f1b"},
		DDP:      engine.DDPConfig{Compression: "topk"}, Fault: engine.FaultConfig{Kind: "crash"}}
	ref := referenceConfig(c)
	assert.Equal(t, 8, ref.MicroBatch, "micro-batch x 4 replicas")
	assert.Equal(t, 4, ref.GradAccum, "the pipeline's 4 micro-batches accumulated")
	assert.Equal(t, engine.DistConfig{WorldSize: 1}, ref.Dist)
	assert.Equal(t, 1, ref.Pipeline.Stages)
	assert.Empty(t, ref.Fault.Kind)
	assert.Equal(t, "bf16", ref.Precision)

	dp := engine.Config{MicroBatch: 4, GradAccum: 2, Dist: engine.DistConfig{WorldSize: 4}}
	ref = referenceConfig(dp)
	assert.Equal(t, 16, ref.MicroBatch)
	assert.Equal(t, 2, ref.GradAccum)

	// One stage with pipeline.microbatches: the engine accumulates them
	// (trainer.cpp), so the reference does too (gpt/pipeline.yaml's
	// one-stage trials, 4 to 16 micro-batches over 4 ranks).
	one := engine.Config{MicroBatch: 4, GradAccum: 1, Dist: engine.DistConfig{WorldSize: 4},
		Pipeline: engine.PipelineConfig{Stages: 1, Microbatches: 8, Schedule: "1f1b"}}
	ref = referenceConfig(one)
	assert.Equal(t, 16, ref.MicroBatch)
	assert.Equal(t, 8, ref.GradAccum, "8 micro-batches accumulated, as the 4 ranks do")
	assert.Equal(t, 1, ref.Pipeline.Microbatches, "not twice")

	// ZeRO needs data-parallel ranks (the engine refuses it on one rank):
	// the reference is one unsharded rank, which ZeRO-1/2 reproduce.
	z := engine.Config{MicroBatch: 4, GradAccum: 1, Dist: engine.DistConfig{WorldSize: 8}, Zero: engine.ZeroConfig{Stage: 2}}
	ref = referenceConfig(z)
	assert.Zero(t, ref.Zero.Stage)
	assert.Equal(t, 32, ref.MicroBatch)
}

// TestPathKey: trials that differ only in knobs that choose no other code
// (buckets, overlap, NCCL) share a rehearsal with --rehearse-distinct; a
// compression or a schedule does not.
func TestPathKey(t *testing.T) {
	s, p := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 2}\n"+
		"sweep: {strategy: list, trials: [{ddp.bucket_mb: 5}, {ddp.bucket_mb: 50, ddp.overlap: false}, {ddp.compression: bf16}, {zero.stage: 1}]}\n")
	m := &Machine{Device: "cpu", Rehearse: true}
	var keys []string
	for _, tr := range p.Trials {
		sp, err := buildSpec(s, tr, m)
		require.NoError(t, err)
		keys = append(keys, pathKey(sp))
	}
	require.Len(t, keys, 4)
	assert.Equal(t, keys[0], keys[1])
	assert.NotEqual(t, keys[0], keys[2])
	assert.Contains(t, keys[2], "compression bf16")
	assert.NotEqual(t, keys[0], keys[3], "ZeRO runs other collectives")
	assert.Contains(t, keys[3], "zero 1")
}

// TestRankEstimate: the plan-time estimate grows with the micro-batch, falls
// with the stages, and a GPipe stage holds more in flight than 1F1B's.
func TestRankEstimate(t *testing.T) {
	d := engine.Description{Params: 124_000_000, Shapes: map[string]int{"layers": 12, "hidden": 768, "seq_len": 1024, "vocab": 50304, "positions": 1024}}
	c := engine.Config{Family: "gpt", MicroBatch: 8, Precision: "bf16", Pipeline: engine.PipelineConfig{Stages: 1}}
	one := RankEstimate(c, d)
	// 16 bytes x 124M static; 12 x 1024 x 768 x 28 + 1024 x 50304 x 3.6 a sample.
	assert.InDelta(t, 16*124e6+8*(12*1024*768*actBlock16+1024*50304*actLogit16)+fitProcessBytes, float64(one), 1)
	c.MicroBatch = 16
	assert.Greater(t, RankEstimate(c, d), one)
	c.Pipeline = engine.PipelineConfig{Stages: 4, Microbatches: 8, Schedule: "gpipe"}
	gpipe := RankEstimate(c, d)
	c.Pipeline.Schedule = "1f1b"
	assert.Less(t, RankEstimate(c, d), gpipe)
	img := engine.Description{Params: 25_000_000, Shapes: map[string]int{"image_size": 224}}
	assert.InDelta(t, 12*25e6+2*2*resnetSample16+fitProcessBytes, float64(RankEstimate(engine.Config{Family: "resnet50", MicroBatch: 2, Precision: "fp32"}, img)), 1)
}

// TestCheckRehearsalFit: ranks sharing the host beyond its memory are refused
// with the number that fits; a plan that fits passes with its estimates.
func TestCheckRehearsalFit(t *testing.T) {
	s, p := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny, micro_batch: 2}\nworkload: {device: cpu, ranks: 8}\n")
	m := &Machine{Device: "cpu", Rehearse: true}
	describe := func(engine.Config) (engine.Description, error) {
		return engine.Description{Params: 1 << 26, Shapes: map[string]int{"layers": 2, "hidden": 64, "seq_len": 64, "vocab": 256}}, nil
	}
	per := RankEstimate(engine.Config{Family: "gpt", MicroBatch: 2, Precision: "fp32", Pipeline: engine.PipelineConfig{Stages: 1}, Dist: engine.DistConfig{WorldSize: 8}},
		engine.Description{Params: 1 << 26, Shapes: map[string]int{"layers": 2, "hidden": 64, "seq_len": 64, "vocab": 256}})

	est, err := CheckRehearsalFit(s, p, m, describe, m.RehearsalTarget(store.Host{MemBytes: uint64(per) * 100}), false)
	require.NoError(t, err)
	assert.Equal(t, per, est.Estimates[p.Trials[0].ID])
	// The recorded model is the same estimate split: static + 2 samples + the process.
	model := est.Models[p.Trials[0].ID]
	assert.Positive(t, model.StaticBytes)
	assert.Positive(t, model.PerSampleBytes)
	assert.InDelta(t, per, model.At(2)+fitProcessBytes, 1)
	assert.Greater(t, model.At(4)-model.At(2), int64(0), "the per-sample part grows with the micro-batch")

	_, err = CheckRehearsalFit(s, p, m, describe, m.RehearsalTarget(store.Host{MemBytes: uint64(per) * 4}), false)
	require.Error(t, err)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err))
	assert.Contains(t, err.Error(), "8 ranks share the host")
	assert.Contains(t, err.Error(), "3 ranks per device fit (3 ranks on this machine)", "0.9 x 4 estimates hold 3")

	_, err = CheckRehearsalFit(s, p, m, func(engine.Config) (engine.Description, error) {
		return engine.Description{}, errors.New("no such preset")
	}, m.RehearsalTarget(store.Host{MemBytes: 1 << 40}), false)
	assert.ErrorContains(t, err, "no such preset")
}

// TestCheckRehearsalFitDistinct: with --rehearse-distinct a trial that does
// not fit is skipped when a trial of its layout and paths (here GPipe with
// fewer micro-batches) fits; without it, or when none fits, the plan is
// refused.
func TestCheckRehearsalFitDistinct(t *testing.T) {
	s, p := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny, micro_batch: 2}\nworkload: {device: cpu, ranks: 4}\n"+
		"baseline: {pipeline.stages: 2, pipeline.schedule: gpipe}\nsweep: {strategy: grid, knobs: {pipeline.microbatches: [2, 16]}}\n")
	require.Len(t, p.Trials, 2)
	m := &Machine{Device: "cpu", Rehearse: true}
	d := engine.Description{Params: 1 << 20, Shapes: map[string]int{"layers": 2, "hidden": 512, "seq_len": 512, "vocab": 1024, "positions": 512}}
	describe := func(engine.Config) (engine.Description, error) { return d, nil }
	small, err := CheckRehearsalFit(s, p, m, describe, m.RehearsalTarget(store.Host{MemBytes: 1 << 50}), true)
	require.NoError(t, err)
	e2, e16 := small.Estimates[p.Trials[0].ID], small.Estimates[p.Trials[1].ID]
	require.Greater(t, e16, e2, "16 micro-batches in flight hold more")
	host := store.Host{MemBytes: uint64(float64(4*(e2+e16)/2) / fitHeadroom)} // 4 ranks of the small one fit, not of the large

	_, err = CheckRehearsalFit(s, p, m, describe, m.RehearsalTarget(host), false)
	require.Error(t, err, "every trial rehearsed: the large one does not fit")
	assert.Contains(t, err.Error(), "trial "+p.Trials[1].ID)
	assert.NotContains(t, err.Error(), "trial "+p.Trials[0].ID)

	fit, err := CheckRehearsalFit(s, p, m, describe, m.RehearsalTarget(host), true)
	require.NoError(t, err)
	assert.Contains(t, fit.Unfit[p.Trials[1].ID], "rehearsed by trial "+p.Trials[0].ID)
	assert.Empty(t, fit.Unfit[p.Trials[0].ID])
	require.Len(t, fit.Rows, 2)
	assert.True(t, fit.Rows[0].Fits)
	assert.False(t, fit.Rows[1].Fits)
	assert.Equal(t, p.Trials[0].ID, fit.Rows[1].CoveredBy)

	// Distinct, and the study's other layout fits: the layout that does not
	// is skipped, refused with the number that would fit, and the rest runs.
	s3, p3 := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny, micro_batch: 2}\nworkload: {device: cpu, ranks: 4}\n"+
		"baseline: {pipeline.stages: 2, pipeline.microbatches: 16}\nsweep: {strategy: grid, knobs: {pipeline.schedule: [1f1b, gpipe]}}\n")
	require.Len(t, p3.Trials, 2)
	fit, err = CheckRehearsalFit(s3, p3, m, describe, m.RehearsalTarget(host), true)
	require.NoError(t, err)
	assert.Empty(t, fit.Unfit[p3.Trials[0].ID], "1F1B holds 2 micro-batches in flight: fits")
	assert.Contains(t, fit.Unfit[p3.Trials[1].ID], "refused at plan time, not rehearsed")
	assert.Contains(t, fit.Unfit[p3.Trials[1].ID], "ranks per device fit")
	_, err = CheckRehearsalFit(s3, p3, m, describe, m.RehearsalTarget(host), false)
	require.Error(t, err, "without distinct the study is refused")

	_, err = CheckRehearsalFit(s, p, m, describe, m.RehearsalTarget(store.Host{MemBytes: uint64(e2)}), true)
	require.Error(t, err, "distinct, but no trial of the layout fits")
	assert.Equal(t, exitcode.Environment, exitcode.Of(err))
}

// TestCheckRehearsalFitReference: ranks spread over 8 GPUs fit one each, but
// the one-rank reference trains the global batch (8 micro-batches) alone on
// one GPU: when that does not fit, the trial still runs and the reference
// is recorded as not launched, with the reason.
func TestCheckRehearsalFitReference(t *testing.T) {
	s, p := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny, micro_batch: 8}\nworkload: {device: cuda, gpus: 8}\nbaseline: {graphs: false}\n")
	m := &Machine{Device: "cuda", Rehearse: true, GPUs: []string{"0", "1", "2", "3", "4", "5", "6", "7"}}
	d := engine.Description{Params: 1 << 20, Shapes: map[string]int{"layers": 4, "hidden": 1024, "seq_len": 1024, "vocab": 1024, "positions": 1024}}
	describe := func(engine.Config) (engine.Description, error) { return d, nil }
	wide, err := CheckRehearsalFit(s, p, m, describe, FitTarget{Device: "cuda", Devices: 8, Capacity: 1 << 50, What: "a GPU"}, false)
	require.NoError(t, err)
	id := p.Trials[0].ID
	row := wide.Rows[0]
	require.Greater(t, row.Reference, row.Estimate, "the global batch on one rank holds more")
	assert.Empty(t, wide.NoReference[id])

	capacity := int64(float64(row.Estimate+row.Reference) / 2 / fitHeadroom) // one rank fits, the reference does not
	fit, err := CheckRehearsalFit(s, p, m, describe, FitTarget{Device: "cuda", Devices: 8, Capacity: capacity, What: "a GPU"}, false)
	require.NoError(t, err, "the trial's ranks fit, one a GPU")
	assert.Contains(t, fit.NoReference[id], "the one-rank reference (micro-batch 64, grad_accum 1)")
	assert.Contains(t, fit.NoReference[id], "the losses are not compared")
}

// TestCheckRehearsalFitTwin: a tensor-parallel trial in bf16 has an fp32
// twin (its ranks in fp32, larger: fp32 activations). Three branches: the twin
// fits at the trial's micro-batch (neither NoTwin nor TwinMicroBatch); it does
// not, and runs at the largest smaller micro-batch at which its ranks and its
// one-rank fp32 reference fit (TwinMicroBatch); it fits at none (micro-batch 1
// already too large: NoTwin, with the reason). fp32 trials and data-parallel
// trials have none.
func TestCheckRehearsalFitTwin(t *testing.T) {
	tpStudy := func(mb int) (*study.Study, *study.Plan) {
		return loadStudy(t, fmt.Sprintf("name: s\nmodel: {family: gpt, preset: tiny, micro_batch: %d}\nworkload: {device: cuda, gpus: 2}\n"+
			"baseline: {graphs: false, precision: bf16, tp.degree: 2}\n", mb))
	}
	s, p := tpStudy(8)
	m := &Machine{Device: "cuda", Rehearse: true, GPUs: []string{"0"}}
	d := engine.Description{Family: "gpt", Params: 1 << 20, Shapes: map[string]int{"layers": 4, "hidden": 1024, "seq_len": 1024, "vocab": 1024, "positions": 1024, "heads": 4}}
	describe := func(engine.Config) (engine.Description, error) { return d, nil }
	id := p.Trials[0].ID
	wide, err := CheckRehearsalFit(s, p, m, describe, FitTarget{Device: "cuda", Devices: 1, Capacity: 1 << 50, What: "a GPU"}, false)
	require.NoError(t, err)
	assert.Empty(t, wide.NoTwin[id], "fits")
	assert.Empty(t, wide.TwinMicroBatch, "fits at the trial's micro-batch")

	// Fits smaller: the two bf16 ranks fit with 5% to spare, the fp32 twin at
	// micro-batch 8 does not; it runs at the largest micro-batch that fits.
	per := wide.Rows[0].Estimate
	capacity := int64(float64(2*per) * 1.05 / fitHeadroom)
	budget := int64(float64(capacity) * fitHeadroom)
	fit, err := CheckRehearsalFit(s, p, m, describe, FitTarget{Device: "cuda", Devices: 1, Capacity: capacity, What: "a GPU"}, false)
	require.NoError(t, err)
	assert.Empty(t, fit.NoTwin[id])
	mb := fit.TwinMicroBatch[id]
	require.Positive(t, mb, "the twin at a smaller micro-batch")
	require.Less(t, mb, 8)
	sp, err := buildSpec(s, p.Trials[0], m)
	require.NoError(t, err)
	twin := sp.Configs[0]
	twin.Precision, twin.MicroBatch = "fp32", mb
	assert.LessOrEqual(t, 2*RankEstimate(twin, d), budget, "its two ranks fit at micro-batch %d", mb)
	assert.LessOrEqual(t, RankEstimate(referenceConfig(twin), d), budget, "and its one-rank fp32 reference")
	twin.MicroBatch = mb + 1
	assert.Greater(t, 2*RankEstimate(twin, d), budget, "the largest: micro-batch %d does not fit", mb+1)

	// None fits: at micro-batch 1 the bf16 ranks fit with 1% to spare, the
	// fp32 twin at 1 does not.
	s1, p1 := tpStudy(1)
	wide1, err := CheckRehearsalFit(s1, p1, m, describe, FitTarget{Device: "cuda", Devices: 1, Capacity: 1 << 50, What: "a GPU"}, false)
	require.NoError(t, err)
	per1 := wide1.Rows[0].Estimate
	twin.MicroBatch = 1
	require.Greater(t, float64(RankEstimate(twin, d)), 1.01*float64(per1), "fp32 holds more at micro-batch 1")
	none, err := CheckRehearsalFit(s1, p1, m, describe, FitTarget{Device: "cuda", Devices: 1, Capacity: int64(float64(2*per1) * 1.01 / fitHeadroom), What: "a GPU"}, false)
	require.NoError(t, err)
	id1 := p1.Trials[0].ID
	assert.Contains(t, none.NoTwin[id1], "the trial's fp32 twin fits at no micro-batch from 1 down to 1")
	assert.Contains(t, none.NoTwin[id1], "not launched")
	assert.Empty(t, none.TwinMicroBatch)

	s32, p32 := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny, micro_batch: 8}\nworkload: {device: cuda, gpus: 2}\n"+
		"baseline: {graphs: false, precision: fp32, tp.degree: 2}\n")
	fit, err = CheckRehearsalFit(s32, p32, m, describe, FitTarget{Device: "cuda", Devices: 1, Capacity: 1 << 40, What: "a GPU"}, false)
	require.NoError(t, err)
	assert.Empty(t, fit.NoTwin, "fp32: the trial is its own twin")
}

// TestCPUThreadsPerNode: CPU ranks share their own node's cores, not the
// whole world's (audit, 2026-12-07: 2 nodes x 4 ranks gave each rank an
// eighth of its node); a rehearsal's ranks all share this host's.
func TestCPUThreadsPerNode(t *testing.T) {
	defer func(f func() int) { hostCPUs = f }(hostCPUs)
	hostCPUs = func() int { return 16 }
	s, p := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 8, nodes: 2}\n")
	sp, err := buildSpec(s, p.Trials[0], &Machine{Device: "cpu"})
	require.NoError(t, err)
	require.Equal(t, 8, sp.Ranks)
	assert.Equal(t, 4, sp.Configs[0].Threads, "16 cores for the node's 4 ranks")
	s, p = loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 4}\n")
	sp, err = buildSpec(s, p.Trials[0], &Machine{Device: "cpu"})
	require.NoError(t, err)
	assert.Equal(t, 4, sp.Configs[0].Threads, "one node: its 4 ranks")
	s, p = loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 4, nodes: 2}\n")
	sp, err = buildSpec(s, p.Trials[0], &Machine{Device: "cuda", GPUs: []string{"0"}, Rehearse: true})
	require.NoError(t, err)
	assert.Equal(t, 2, sp.Configs[0].Threads, "a rehearsal: all 8 ranks on this host")
}
