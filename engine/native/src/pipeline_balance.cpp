// pipeline_balance.cpp: per-layer times for pipeline.balance_by: time
// (pipeline.h measure_layer_ms).
#include <algorithm>
#include <chrono>

#include "pipeline.h"
#include "precision.h"

namespace cs {

std::vector<double> measure_layer_ms(Model& model, const Batch& batch, torch::Device device,
                                     Precision precision) {
  constexpr int kWarmup = 1, kTimed = 3;
  const int64_t L = model.num_layers();
  auto params = model.parameters();
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad());
  std::vector<torch::Tensor> buffers;
  {
    torch::NoGradGuard ng;
    for (const auto& b : model.buffers()) buffers.push_back(b.clone());
  }
  std::vector<std::vector<double>> samples(static_cast<size_t>(L));
  for (int rep = 0; rep < kWarmup + kTimed; rep++) {
    torch::Tensor x;
    for (int64_t l = 0; l < L; l++) {
      // Each layer alone, its input a leaf as a stage receives it.
      torch::Tensor in = x.defined() ? x.detach().requires_grad_(true) : x;
      synchronize(device);
      const auto t0 = std::chrono::steady_clock::now();
      torch::Tensor y, out;
      {
        AutocastScope autocast(device, precision);
        y = model.forward_layers(l, l + 1, in, batch);
        if (l == L - 1) out = model.loss(y, batch);
      }
      if (out.defined()) {
        out.backward();
      } else if (y.requires_grad()) {
        y.backward(torch::ones_like(y));
      }
      synchronize(device);
      const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
      if (rep >= kWarmup) samples[size_t(l)].push_back(dt.count());
      x = y.detach();
    }
  }
  // Leave the model as it was: gradients and BatchNorm statistics.
  torch::NoGradGuard ng;
  for (size_t i = 0; i < params.size(); i++) params[i].mutable_grad() = grads[i];
  auto now = model.buffers();
  for (size_t i = 0; i < now.size(); i++) now[i].copy_(buffers[i]);
  std::vector<double> ms(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; l++) {
    auto& v = samples[size_t(l)];
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    ms[size_t(l)] = v[v.size() / 2];
  }
  return ms;
}

}  // namespace cs
