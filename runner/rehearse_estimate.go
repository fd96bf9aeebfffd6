package runner

import (
	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/study"
)

// RankEstimate: the memory one rank of a rehearsal needs, from the model's
// static facts (cs_describe) and its config. It is the allocator's peak of
// an eager step (graphs off, as in every multi-rank trial) plus the process
// (CUDA context and libraries), calibrated on measured peaks
// (mem_peak_bytes, the largest over a trial's steps) of these records:
//
//	results/reference/gpt124m-h200-auto-2026-12-02: GPT-2 124M, 1024 tokens,
//	  micro-batch 4, 8, 16, 32 in bf16; 8 in fp16, fp32, tf32; grad_accum 4;
//	  activation checkpointing (fused AdamW, one H200);
//	results/reference/bert-h200-kernel-mix-2026-12-02: BERT-large, 128
//	  tokens, micro-batch 32, bf16 (one H200);
//	results/reference/resnet50-h200-kernel-mix-2026-12-02: ResNet-50, 224
//	  pixels, micro-batch 256, bf16 and fp16 (one H200);
//	results/reference/gpu-check-2026-12-06/rehearse.tgz: GPT-2 124M,
//	  micro-batch 8 bf16, 2 and 8 ranks sharing one H100 (engine AdamW);
//
// and consistent with ../shared/runs/h100-2026-12-06 (BERT-large micro-batch
// 32: 8.22 GB; ResNet-50 micro-batch 128: 6.40 GB; eager bf16, one H100).
// TestRankEstimateMatchesMeasuredPeaks reads the records above and holds the
// estimate within 15% of every one of them. The terms:
//
//	model states: study.EstimateModelStates (fp32 weights and gradients,
//	  AdamW's two moments or SGD's momentum; ZeRO divides them) of the rank's
//	  stage: its even share of the transformer blocks plus the embeddings,
//	  which the first stage holds and the last holds again (the tied head);
//	the reducer's fp32 gradient buckets with data parallel, and the
//	  accumulation buffer with grad_accum > 1: 4 bytes a parameter each
//	  (measured: 3.6 and 4.1); the compression's wire copy (fp16, bf16: 2
//	  bytes) or top-k's error-feedback residual (4 bytes);
//	activations per sample, in 16-bit autocast (bf16, fp16): 28 bytes per
//	  token and hidden unit per transformer block (Korthikanti et al. count 34
//	  without fused attention) and 3.6 bytes per logit (the logits and their
//	  gradient; BERT's masked positions only); in fp32 and tf32 42 and 8
//	  (fit to GPT-2's fp32 point; there is no eager BERT fp32 record).
//	  ResNet-50: 44 MiB per 224x224 sample in 16-bit (88 MiB in fp32, twice:
//	  not measured), by the image's area. Activation checkpointing keeps each
//	  block's fp32 input (4 bytes), one block's activations and the logits:
//	  that over-estimates the one measured point by about 30% (safe side);
//	micro-batches in flight: stage i of a pipeline holds every micro-batch
//	  with GPipe and min(micro-batches, stages - i) with 1F1B; the last
//	  stage holds the logits, so the larger of the first and last stage counts;
//	tensor parallelism (tp.degree > 1): the model states and buckets of
//	  one tensor rank's share of the parameters (study.TensorShare; under a
//	  pipeline of its stage's: the blocks' sharded share and the
//	  vocabulary-sharded embedding the end stages hold), the
//	  blocks' activations by tpActivationShare, the logits by the degree
//	  (vocabulary-parallel), at 10 bytes a logit in 16-bit (12 in fp32) where
//	  the fused head keeps 3.6: tp.cpp's vocabulary-parallel cross-entropy
//	  saves the fp32 softmax (4), and its backward clones it (4) and casts
//	  the gradient to the logits' dtype (2 in 16-bit, 4 in fp32) while every
//	  block's activations are still held (from the code, not fitted; it
//	  explains the 12% and 17% the first estimate missed on the two GPT-2
//	  350M tp 2 records of gpu-check-2026-12-06f and the out-of-memory of
//	  its tp 4 micro-batch 16 trial, 8 ranks on one 80 GB H100);
//	  data parallel is the ranks / (tp x stages);
//	the process: 512 MiB (CUDA context and libraries; not in the allocator's
//	  peak), which with the 90% headroom of CheckRehearsalFit also covers the
//	  allocator's reserve above its peak (2-4% in the rehearsal records).
const (
	fitProcessBytes = 512 << 20
	actBlock16      = 28.0
	actBlock32      = 42.0
	actLogit16      = 3.6
	actLogit32      = 8.0
	actLogitTP16    = 10.0
	actLogitTP32    = 12.0
	actCkptInput    = 4.0
	resnetSample16  = 44 << 20
	dpBucketBytes   = 4
	accumBytes      = 4
)

// RankEstimate is the estimated memory of one rank of cfg, in bytes.
func RankEstimate(cfg engine.Config, d engine.Description) int64 {
	stages, tp, dp := max(cfg.Pipeline.Stages, 1), tpDegree(cfg), dataParallelOf(cfg)
	// One rank's parameters at its largest stage, as the plan counts them.
	params := study.RankParams(cfg.Family, d.Params, d.Shapes, stages, tp)
	static := float64(study.EstimateModelStates(params, cfg.Family, 1, dp, cfg.Zero.Stage).Total())
	if dp > 1 {
		static += float64(params) * dpBucketBytes
	}
	if cfg.GradAccum > 1 || (stages == 1 && cfg.Pipeline.Microbatches > 1) { // one stage: micro-batches accumulate
		static += float64(params) * accumBytes
	}
	switch cfg.DDP.Compression {
	case "fp16", "bf16":
		static += float64(params) * 2
	case "topk":
		static += float64(params) * 4
	}
	first, last := stageActivations(cfg, d, stages)
	mb := float64(max(cfg.MicroBatch, 1))
	acts := max(first*inFlight(cfg, stages, 0), last*inFlight(cfg, stages, stages-1)) * mb
	return int64(static+acts) + fitProcessBytes
}

// stageActivations is the activation bytes per sample of the first and the
// last stage (the same stage without a pipeline).
func stageActivations(cfg engine.Config, d engine.Description, stages int) (first, last float64) {
	half := cfg.Precision == "bf16" || cfg.Precision == "fp16" || cfg.Precision == "fp8" // fp8: bf16 activations
	sh := d.Shapes
	if sh["image_size"] > 0 {
		side := float64(sh["image_size"]) / 224
		if cfg.ImageSize > 0 {
			side = float64(cfg.ImageSize) / 224
		}
		per := resnetSample16 * side * side / float64(stages)
		if !half {
			per *= 2
		}
		return per, per
	}
	s, h, vocab := float64(sh["seq_len"]), float64(sh["hidden"]), float64(sh["vocab"])
	if cfg.SeqLen > 0 {
		s = float64(cfg.SeqLen)
	}
	layers := float64((sh["layers"] + stages - 1) / stages)
	block, logit := actBlock16, actLogit16
	if !half {
		block, logit = actBlock32, actLogit32
	}
	positions := s // tokens with logits: BERT's masked ones only
	if m := sh["masked_per_sequence"]; m > 0 {
		positions = float64(m)
	}
	if tp := tpDegree(cfg); tp > 1 {
		block *= tpActivationShare(tp, cfg.TP.SequenceParallel)
		vocab /= float64(tp) // vocabulary-parallel logits: each rank its columns
		logit = actLogitTP32
		if half {
			logit = actLogitTP16
		}
	}
	blocks := s * h * block * layers
	if cfg.ActivationCheckpointing {
		blocks = s*h*actCkptInput*layers + s*h*block
	}
	logits := positions * vocab * logit
	if stages == 1 {
		return blocks + logits, blocks + logits
	}
	return blocks, blocks + logits
}

// tpActivationShare is the share of a transformer block's activations one
// tensor rank keeps (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models", table 2, without the attention
// scores, which fused attention does not keep): of the 34 bytes per token and
// hidden unit, 24 are inside the parallel regions and divided by the degree;
// the other 10 (the LayerNorms' inputs, the dropout masks, the inputs of the
// q|k|v and first MLP layers) are replicated on every tensor rank unless
// sequence parallelism splits them too. From the paper's accounting; with the
// vocabulary-parallel logits' 10 bytes it is within 3% of the two GPT-2 350M
// tp 2 records of gpu-check-2026-12-06f (no tp 4 or 8 record yet).
func tpActivationShare(tp int, sequenceParallel bool) float64 {
	if sequenceParallel {
		return 1 / float64(tp)
	}
	return (10 + 24/float64(tp)) / 34
}

// inFlight is the micro-batches whose activations stage i holds at once.
func inFlight(cfg engine.Config, stages, i int) float64 {
	if stages <= 1 {
		return 1 // accumulated micro-batches free their activations one by one
	}
	m := max(cfg.Pipeline.Microbatches, 1)
	if cfg.Pipeline.Schedule == "1f1b" {
		return float64(min(m, stages-i))
	}
	return float64(m)
}
