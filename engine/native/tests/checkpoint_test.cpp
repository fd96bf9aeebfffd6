// checkpoint_test.cpp: activation checkpointing (checkpoint.cpp) changes what
// is kept for the backward pass, nothing else. Each tiny family is built twice
// from one seed, with and without checkpointing, and takes the same batches:
// the losses, every parameter's gradient and every buffer (ResNet's BatchNorm
// running statistics and batch counts) must agree. On the CPU the
// recomputation runs the same kernels on the same inputs, so they agree to
// rounding (1e-6 relative; measured: bit for bit). A recomputation that lost
// a gradient, or that updated BatchNorm's running statistics a second time in
// the step (0.19 of the batch mean after one step instead of 0.1), fails.
#include <cmath>
#include <iostream>
#include <string>

#include "model.h"
#include "native_test.h"

namespace {

int same_training(const std::string& name) {
  const torch::Device cpu(torch::kCPU);
  const cs::Family& fam = cs::family(name);
  cs::ModelConfig c;
  c.family = name;
  c.preset = "tiny";
  c.seed = 5;
  c.micro_batch = 4;
  auto plain = fam.build(c, cpu);
  c.activation_checkpointing = true;
  auto ckpt = fam.build(c, cpu);
  auto data = fam.data(c, cpu, 0, 1);
  plain->train();
  ckpt->train();
  // Two steps of forward and backward (gradients accumulate, as in grad_accum):
  // the second sees the running statistics the first left.
  for (int step = 0; step < 2; ++step) {
    const cs::Batch b = data->next();
    auto lp = plain->forward_loss(b);
    auto lc = ckpt->forward_loss(b);
    lp.backward();
    lc.backward();
    if (std::abs(lp.item<double>() - lc.item<double>()) > 1e-6 * std::abs(lp.item<double>())) {
      std::cerr << "FAIL " << name << " step " << step << ": loss " << lp.item<double>()
                << " without checkpointing, " << lc.item<double>() << " with\n";
      return 1;
    }
  }
  auto pp = plain->named_parameters(), pc = ckpt->named_parameters();
  CS_CHECK(pp.size() == pc.size());
  double grad_norm = 0;
  for (const auto& p : pp) {
    const auto& q = pc[p.key()];
    CS_CHECK(p.value().grad().defined() && q.grad().defined());
    grad_norm += p.value().grad().norm().item<double>();
    if (rel_err(q.grad(), p.value().grad()) > 1e-6 &&
        (q.grad() - p.value().grad()).abs().max().item<double>() > 1e-12) {
      std::cerr << "FAIL " << name << ": gradient of " << p.key() << " differs with checkpointing ("
                << rel_err(q.grad(), p.value().grad()) << " relative)\n";
      return 1;
    }
  }
  CS_CHECK(grad_norm > 0);
  auto bp = plain->named_buffers(), bc = ckpt->named_buffers();
  CS_CHECK(bp.size() == bc.size());
  for (const auto& b : bp) {
    const auto& q = bc[b.key()];
    const bool same = b.value().is_floating_point()
                          ? rel_err(q, b.value()) <= 1e-6 ||
                                (q - b.value()).abs().max().item<double>() <= 1e-12
                          : torch::equal(q, b.value());
    if (!same) {
      std::cerr << "FAIL " << name << ": buffer " << b.key()
                << " differs with checkpointing (first element " << b.value().flatten()[0].item<double>()
                << " without, " << q.flatten()[0].item<double>() << " with)\n";
      return 1;
    }
  }
  std::cout << "  checkpointing " << name << " tiny: same losses, gradients and "
            << bp.size() << " buffers (cpu)\n";
  return 0;
}

}  // namespace

int checkpoint_tests() {
  int failed = 0;
  for (const std::string name : {"gpt", "bert", "resnet50"})
    failed += run_case("checkpoint", name, [&] { return same_training(name); });
  return failed;
}
