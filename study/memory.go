package study

import (
	"strconv"

	"github.com/casestudy/casestudy/engine"
)

// ModelStates is the planner's estimate of one rank's model states: the
// fp32 weights, their gradients and the optimizer states, as the engine keeps
// them (engine/native/src/zero.h; docs/zero.md). Activations, the allocator's
// slack and communication buffers are not included: it is what ZeRO divides,
// not a prediction of the peak.
type ModelStates struct {
	Weights, Grads, OptimStates int64 // bytes on one rank
}

// Total is the three together.
func (m ModelStates) Total() int64 { return m.Weights + m.Grads + m.OptimStates }

// EstimateModelStates is one rank's model states for a model of params
// parameters in family (gpt and bert train with AdamW: two fp32 moments;
// resnet50 with SGD: one momentum buffer), cut into stages pipeline stages (an
// even share each: an estimate) and replicated over dp data-parallel ranks with
// ZeRO stage zero: 1 divides the optimizer states by dp, 2 the gradients too.
func EstimateModelStates(params int64, family string, stages, dp, zero int) ModelStates {
	stages, dp = max(stages, 1), max(dp, 1)
	p := (params + int64(stages) - 1) / int64(stages)
	perParam := int64(8) // AdamW: exp_avg, exp_avg_sq
	if family == "resnet50" {
		perParam = 4 // SGD momentum
	}
	share := func(bytes int64) int64 { return (bytes + int64(dp) - 1) / int64(dp) }
	m := ModelStates{Weights: 4 * p, Grads: 4 * p, OptimStates: perParam * p}
	if zero >= 1 {
		m.OptimStates = share(m.OptimStates)
	}
	if zero >= 2 {
		m.Grads = share(m.Grads)
	}
	return m
}

// ModelStatesFor is EstimateModelStates for a trial's knob values, of the
// parameters one rank of its largest stage holds (RankParams; the model's
// shapes from engine.ShapeOf and engine.Positions): the same count the
// rehearsal's fit check uses (runner.RankEstimate).
func (s *Study) ModelStatesFor(params int64, values map[string]string) ModelStates {
	stages, err := strconv.Atoi(values["pipeline.stages"])
	if err != nil || stages < 1 {
		stages = 1
	}
	zero, _ := strconv.Atoi(values["zero.stage"])
	tp, _ := strconv.Atoi(values["tp.degree"])
	var shapes map[string]int
	if sh, ok := engine.ShapeOf(s.Model.Family, s.Model.Preset, s.Model.Layers, s.Model.Hidden); ok {
		shapes = map[string]int{"layers": sh.Layers, "hidden": sh.Hidden, "vocab": sh.Vocab,
			"positions": engine.Positions(s.Model.Family, s.Model.Preset)}
		if s.Model.Family == "bert" {
			shapes["intermediate"] = 4 * sh.Hidden // bert.cpp: 4 x hidden, its presets too
		}
	}
	return EstimateModelStates(RankParams(s.Model.Family, params, shapes, stages, tp), s.Model.Family, 1,
		s.DataParallelFor(values), zero)
}

// RankParams is how many of a model's params parameters one rank holds at
// tp.degree tp and stages pipeline stages, at its largest stage. A
// transformer's (shapes with a vocab) end stages hold their even share of the
// blocks and the whole embedding, (vocab + positions) x hidden: the first
// stage reads it, the last holds the tied head again (gpt.cpp's and
// bert.cpp's stage split). With tp > 1 a tensor rank's share of that
// (TensorShare): the blocks' sharded parameters divided over the stages, the
// vocabulary-sharded embedding whole. Without shapes (resnet50, or a preset
// the planner does not know) an even share of the stages. Both per-rank
// estimates count with it: the plan's (ModelStatesFor) and the rehearsal's
// fit check (runner.RankEstimate).
func RankParams(family string, params int64, shapes map[string]int, stages, tp int) int64 {
	stages = max(stages, 1)
	emb := int64(0) // what each end stage holds whole
	if stages > 1 && shapes["vocab"] > 0 && shapes["image_size"] == 0 {
		emb = int64(shapes["vocab"]+shapes["positions"]) * int64(shapes["hidden"])
	}
	if emb > params {
		emb = 0
	}
	p := (params-emb)/int64(stages) + emb
	if tp <= 1 {
		return p
	}
	sharded := TensorShardedParams(family, shapes)
	if emb > 0 { // the blocks' sharded share of the stage and the whole vocabulary-sharded embedding
		word := int64(shapes["vocab"]) * int64(shapes["hidden"])
		sharded = (sharded-word)/int64(stages) + word
	}
	return TensorShare(p, sharded, tp)
}

// TensorShardedParams is how many of a transformer's parameters tensor
// parallelism splits across a tensor group (Megatron-LM's layout, as
// engine/native/src/tp.h shards them), from the model's shapes (cs_describe's
// shapes, or engine.ShapeOf): every block's linear weights (GPT: q|k|v, the
// attention projection and the MLP, 12 hidden² a block; BERT: 4 hidden² +
// 2 hidden x intermediate), the column-parallel biases (q|k|v and the MLP's
// first layer) and the vocabulary embedding with its tied head (BERT: and the
// MLM decoder's bias, vocabulary entries). LayerNorms, the row-parallel
// biases (added after the all-reduce), the position (and BERT's token-type)
// embeddings and BERT's pooler, MLM transform and NSP classifier are
// replicated on every tensor rank. 0 for a model without these shapes
// (resnet50).
func TensorShardedParams(family string, shapes map[string]int) int64 {
	l, h, v := int64(shapes["layers"]), int64(shapes["hidden"]), int64(shapes["vocab"])
	if l == 0 || h == 0 {
		return 0
	}
	inter := int64(shapes["intermediate"])
	if inter == 0 {
		inter = 4 * h // GPT-2's MLP
	}
	switch family {
	case "gpt":
		return l*(4*h*h+2*h*inter+3*h+inter) + v*h
	case "bert":
		return l*(4*h*h+2*h*inter+3*h+inter) + v*h + v
	}
	return 0
}

// TensorShare is one tensor rank's parameters: its 1/tp of the sharded ones
// (rounded up) and every replicated one.
func TensorShare(params, sharded int64, tp int) int64 {
	if tp <= 1 || sharded <= 0 || sharded > params {
		return params
	}
	return params - sharded + (sharded+int64(tp)-1)/int64(tp)
}
