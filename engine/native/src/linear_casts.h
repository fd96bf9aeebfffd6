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
//
// With a LinearCopies (kernels.h "adamc"; the model keeps one) the casts
// outlive the forward pass: each tensor's cast has one buffer, and the
// optimizer's AdamW kernel writes the updated weight into it as it updates
// the fp32 master (Optimizer::keep_copies), so that the next forward casts
// nothing that only the optimizer wrote. A copy is valid while its source
// has the version counter and the storage it had when the copy was written:
// every in-place op (a checkpoint's copy_, torch's optimizers) moves the
// counter, set_data (ZeRO's flat buffer, tensor parallel's shards, a
// pipeline's released layers) moves the storage, and what writes through raw
// pointers (collectives: the initial broadcast, ZeRO's all-gathers; the
// engine's AdamW) bumps the counter after (torch::autograd::impl::bump_version).
// An invalid copy is cast again at the next forward, into the same buffer
// (its address fixed, as a captured CUDA graph needs) unless something else
// still holds it (a forward's autograd graph not yet run backward), then into
// a new one.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <unordered_map>
#include <vector>

#include "cuda/dtype.h"

namespace cs {

class LinearCopies {
 public:
  // p's copy in dt when it holds the cast of p's present values; else undefined.
  torch::Tensor valid(const torch::Tensor& p, at::ScalarType dt) const;
  // valid, for a forward that reads the copy without casting it: marked as
  // served (served_valid).
  torch::Tensor serve(const torch::Tensor& p, at::ScalarType dt);
  // The buffer for p's copy in dt, recorded as valid for p as it is now: the
  // caller writes the cast into it before anything reads it.
  torch::Tensor claim(const torch::Tensor& p, at::ScalarType dt);

  // Whether the optimizer's AdamW writes p's copy as it updates p (not where
  // p has none, or one it cannot write), where (null for an empty p), and
  // whether the copy holds p's cast now: the step keeps it valid only then
  // (a skipped step, found_inf on the device, writes neither p nor the copy).
  struct Target {
    bool writes = false;
    void* dst = nullptr;
    kern::DType dt = kern::DType::BF16;
    bool valid = false;
  };
  Target target(const torch::Tensor& p) const;
  // After the optimizer wrote p (its version bumped) and, where target gave
  // one, the copy: valid for p as it is now when was_valid, else invalid.
  void updated(const torch::Tensor& p, bool was_valid);

  // Whether every copy served since clear_served is valid now. A captured
  // CUDA graph's forward reads the copies it was served, uncast, at every
  // replay: the captured optimizer step must have written them all
  // (Trainer::capture checks it).
  bool served_valid() const;
  void clear_served();
  // Every copy invalid (a capture that failed: its casts ran nothing).
  void invalidate_all();

  // How many copies exist, how many of them are valid for their sources now (tests).
  size_t size() const { return copies_.size(); }
  size_t valid_count() const;

 private:
  struct Copy {
    torch::Tensor source;  // held: its TensorImpl is the key, never reused while here
    torch::Tensor value;
    int64_t version = -1;  // of the source when written; -1: invalid
    const void* data = nullptr;  // the source's data then
    bool served = false;         // serve since clear_served, not cast since
  };
  static bool holds(const Copy& c, const torch::Tensor& p);
  std::unordered_map<const c10::TensorImpl*, Copy> copies_;
};

// A model whose forward keeps its linear layers' copies (GPT, BERT): the
// trainer hands them to the optimizer (Optimizer::keep_copies).
class LinearCopiesModel {
 public:
  virtual ~LinearCopiesModel() = default;
  virtual std::shared_ptr<LinearCopies> linear_copies() = 0;
};

class LinearCasts {
 public:
  // Casts params (fp32, on one CUDA device, or on the CPU in the kernels'
  // host mode) to the autocast dtype of their device when the "cast" kernel
  // is on and autocast is on there; else holds nothing (linear_act casts).
  // With keep (and the "adamc" switch) the casts are keep's copies: only
  // those not valid are cast.
  explicit LinearCasts(const std::vector<torch::Tensor>& params, LinearCopies* keep = nullptr);
  ~LinearCasts();
  LinearCasts(const LinearCasts&) = delete;
  LinearCasts& operator=(const LinearCasts&) = delete;

  // The cast of t into dtype dt from the innermost live LinearCasts of this
  // thread, or t.to(dt) where there is none (t not given to it, or modified
  // since: its version counter moved).
  static torch::Tensor cast(const torch::Tensor& t, at::ScalarType dt);

  // How many casts this instance holds, how many of them its kernel launch
  // cast (the others: valid copies), and how many cast() calls it served (tests).
  size_t size() const { return casts_.size(); }
  size_t cast_count() const { return cast_count_; }
  int64_t served() const { return served_; }

 private:
  struct Cast {
    torch::Tensor value;
    int64_t version;  // of the source tensor when cast
  };
  std::unordered_map<const c10::TensorImpl*, Cast> casts_;
  int64_t served_ = 0;
  size_t cast_count_ = 0;
  LinearCasts* outer_;
};

}  // namespace cs
