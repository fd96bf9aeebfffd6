// linear_casts.h: the linear layers' weights and biases cast to the autocast
// dtype all at once, for linear_act (kernels.h "cast").
//
// Under autocast every linear layer casts its fp32 weight and bias to bf16 or
// fp16 each forward pass: two small kernels per layer (GPT-2 124M: 96 a step,
// BERT-large: 192), each costing more in launch and scheduling than in memory
// traffic. A LinearCasts made at the start of a model's forward pass casts the
// tensors it is given in one kernel launch per 64; while it lives, linear_act
// on this thread takes the casts of those tensors from it (and casts any
// other tensor itself). The values are the same either way: round to nearest
// even from fp32.
#pragma once

#include <torch/torch.h>

#include <unordered_map>
#include <vector>

namespace cs {

class LinearCasts {
 public:
  // Casts params (fp32, on one CUDA device, or on the CPU in the kernels'
  // host mode) to the autocast dtype of their device when the "cast" kernel
  // is on and autocast is on there; else holds nothing (linear_act casts).
  explicit LinearCasts(const std::vector<torch::Tensor>& params);
  ~LinearCasts();
  LinearCasts(const LinearCasts&) = delete;
  LinearCasts& operator=(const LinearCasts&) = delete;

  // The cast of t into dtype dt from the innermost live LinearCasts of this
  // thread, or t.to(dt) where there is none (t not given to it, or modified
  // since: its version counter moved).
  static torch::Tensor cast(const torch::Tensor& t, at::ScalarType dt);

  // How many casts this instance holds, and how many cast() calls it served (tests).
  size_t size() const { return casts_.size(); }
  int64_t served() const { return served_; }

 private:
  struct Cast {
    torch::Tensor value;
    int64_t version;  // of the source tensor when cast
  };
  std::unordered_map<const c10::TensorImpl*, Cast> casts_;
  int64_t served_ = 0;
  LinearCasts* outer_;
};

}  // namespace cs
