// optim.h: the optimizers and gradient clipping, written so that on CUDA nothing
// in them waits for the host (graph-capturable): step counters, loss-scale checks
// and clip coefficients are device tensors.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "model.h"

namespace cs {

class LinearCopies;

struct OptimOptions {
  OptimizerKind kind = OptimizerKind::AdamW;
  double lr = 3e-4;
  double weight_decay = 0.1;  // AdamW: decoupled; SGD: L2 added to the gradient
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;  // AdamW
  double momentum = 0.9;                           // SGD
};

// Default hyper-parameters for a family's optimizer at learning rate lr.
OptimOptions default_optim(OptimizerKind kind, double lr);

class Optimizer {
 public:
  // decay / no_decay: the parameter groups (Model::decays); states are allocated here.
  Optimizer(std::vector<torch::Tensor> decay, std::vector<torch::Tensor> no_decay,
            const OptimOptions& o);
  // One update from the parameters' .grad() times grad_coef (a 0-d tensor on
  // the device, any float dtype; undefined: 1). found_inf (0-d float32, 1 =
  // skip the update) may be undefined when the step can never be skipped.
  void step(const torch::Tensor& found_inf, const torch::Tensor& grad_coef = {});
  // Whether step applies grad_coef inside its update kernel (the fused CUDA
  // AdamW and SGD take it as their grad_scale, 1 / grad_coef, and write the
  // scaled gradients back; the engine's AdamW kernel takes it the same way
  // and leaves the gradients as they were), so that a caller saves the
  // separate pass over the gradients; otherwise step multiplies the gradients
  // first, as clip_grads would.
  bool folds_grad_coef() {
    decide();
    return fused_;
  }
  // "engine-adamw" (the engine's kernel, kernels.h "adam"), "fused-adamw",
  // "foreach-adamw", "fused-sgd-momentum" or "sgd-momentum" (recorded in
  // cs_info; before the first step, the one intended).
  std::string implementation() const;
  // The linear layers' low-precision copies (linear_casts.h; the model's,
  // LinearCopiesModel::linear_copies): the engine's AdamW kernel writes the copy of each
  // parameter that has one as it updates the parameter (kernels.h "adamc"),
  // keeping it valid for the next forward; every other path leaves the
  // copies of what it updates invalid. Null: none.
  void keep_copies(std::shared_ptr<LinearCopies> copies) { copies_ = std::move(copies); }
  // Bytes of the optimizer states this rank holds (AdamW's two moments, SGD's
  // momentum buffer): the record's optimizer_state_bytes.
  int64_t state_bytes() const;

 private:
  struct Group {
    std::vector<torch::Tensor> params, m, v;  // v unused by SGD
    double wd;
  };
  // At the first step, with the gradients there: the fused kernels need each
  // gradient laid out as its parameter (their fast path's check); otherwise
  // the foreach path runs, from then on. The engine's kernel also needs fp32
  // gradients, dense as their parameters; where one is not, PyTorch's fused
  // AdamW runs instead (where there is one).
  void decide();
  void adamw_fused(Group& g, const torch::Tensor& found_inf, const torch::Tensor& grad_scale);
  // Both groups in one call of the engine's kernel (kernels.h "adam").
  void adamw_engine(const torch::Tensor& found_inf, const torch::Tensor& grad_scale);
  void adamw_foreach(Group& g);
  void sgd_fused(Group& g, const torch::Tensor& found_inf, const torch::Tensor& grad_scale);
  void sgd(Group& g, const torch::Tensor& found_inf);

  OptimOptions o_;
  std::vector<Group> groups_;
  bool fused_ = false;   // a fused kernel of this optimizer kind: PyTorch's CUDA one, or engine_
  bool engine_ = false;  // the engine's AdamW kernel (kernels.h "adam")
  bool decided_ = false;
  std::shared_ptr<LinearCopies> copies_;  // keep_copies
  torch::Tensor step_t_;  // device step counter (fused and engine AdamW)
  int64_t step_ = 0;      // host step counter (foreach AdamW)
};

// Gradient clipping, one implementation for the single rank, data parallel
// and the pipeline (whose stages each hold part of the gradients):
//   sumsq = grad_sumsq(grads)        on each part (a pipeline stage: the gradients it owns)
//   sumsq summed over the parts      (a pipeline all-reduces it, in float64)
//   clip_grads(grads, sumsq, ...)    on each part
// The squares of the per-tensor norms are summed in float64, so the total does
// not depend on how the tensors are grouped into parts or in which order the
// parts are added: a pipeline of any split clips by the same coefficient as one
// rank (a float32 sum moved it by an ulp, which training amplifies).
struct ClipResult {
  torch::Tensor norm, found_inf;  // 0-d float32 on the gradients' device
  // The factor the gradients need, unscale x clip (0-d float64 on the device):
  // applied already unless clip_grads was asked to leave it to the optimizer.
  torch::Tensor coef;
};
// Sum over grads of |g|² (each |g| a float32 L2 norm), a 0-d float64 tensor on
// device (zero for an empty list).
torch::Tensor grad_sumsq(const std::vector<torch::Tensor>& grads, const torch::Device& device);
// Multiplies every gradient by inv_scale (undefined: 1) and clips their global
// L2 norm sqrt(sumsq) to max_norm. Returns the unscaled norm before clipping,
// found_inf (1 when sumsq is inf or nan) and the coefficient; with apply false
// the gradients are left as they are, for Optimizer::step(found_inf, coef)
// where the optimizer folds it in (Optimizer::folds_grad_coef).
ClipResult clip_grads(const std::vector<torch::Tensor>& grads, const torch::Tensor& sumsq,
                      const torch::Tensor& inv_scale, double max_norm, bool apply = true);
// Both over the gradients of params on one rank (single rank, data parallel
// after the all-reduce).
ClipResult unscale_and_clip(const std::vector<torch::Tensor>& params,
                            const torch::Tensor& inv_scale, double max_norm, bool apply = true);

}  // namespace cs
