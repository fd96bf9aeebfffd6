// reducer_test.cpp: the DDP reducer's top-k error feedback under fp16 loss
// scaling (src/reducer.cpp), on a world of one whose all-gather is a copy (the
// CPU engine cannot reach fp16 through the C ABI). The residual must be kept
// unscaled, so that it is rescaled when the loss scale backs off, and a
// skipped step (found_inf) must leave it as it was, so that an inf from an
// overflowing step never enters it. Also the communication progress counters
// (src/comm_watch.h) that the collectives advance.
#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "comm_watch.h"
#include "dist.h"
#include "native_test.h"

using namespace cs;

namespace {

class DoneWork : public CommWork {
 public:
  void wait() override {}
  double elapsed_ms() override { return 0; }
};

// A world of one: the all-gather copies its input, the all-reduce is the identity.
class LocalComm : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "local"; }
  std::string version() const override { return "test"; }
  std::shared_ptr<CommWork> all_reduce_sum(torch::Tensor) override {
    commwatch::issued("all_reduce");
    commwatch::completed();
    return std::make_shared<DoneWork>();
  }
  std::shared_ptr<CommWork> all_gather(torch::Tensor in, torch::Tensor out) override {
    commwatch::issued("all_gather");
    out.copy_(in);
    commwatch::completed();
    return std::make_shared<DoneWork>();
  }
  void broadcast(torch::Tensor, int) override {}
  void send(torch::Tensor, int) override {}
  void recv(torch::Tensor, int) override {}
  void barrier() override {}
};

// One step of gradient g (what autograd would accumulate, already scaled) for
// the reducer's one parameter p; returns the reduced gradient.
torch::Tensor reduce(GradReducer& r, torch::Tensor& p, const torch::Tensor& g, const torch::Tensor& scale,
                     const torch::Tensor& found_inf) {
  if (scale.defined()) r.set_loss_scale(scale);
  r.prepare(true);
  {
    torch::NoGradGuard ng;
    p.mutable_grad().copy_(g);
  }
  r.finalize();
  torch::Tensor out = p.grad().clone();
  r.end_step(found_inf);
  return out;
}

int topk_residual_unscaled() {
  commwatch::reset();
  LocalComm comm;
  torch::Tensor p = torch::zeros({4}, torch::requires_grad());
  DDPOptions o;
  o.compression = "topk";
  o.topk_ratio = 0.25;  // k = 1 of 4
  o.overlap = false;
  auto r = make_reducer({p}, comm, o);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  const torch::Tensor no_inf = torch::zeros({}, f32), inf = torch::ones({}, f32);

  // Step 1 at scale 8: true gradient [4, 1, 2, 0.5]; 4 is sent (scaled: 32),
  // the residual keeps [0, 1, 2, 0.5] unscaled.
  torch::Tensor out = reduce(*r, p, torch::tensor({4.f, 1.f, 2.f, 0.5f}) * 8, torch::full({}, 8.f), no_inf);
  CS_CHECK(out.equal(torch::tensor({32.f, 0.f, 0.f, 0.f})));

  // Step 2 overflows (two inf gradients, more than k) and is skipped: the
  // residual stays as step 1 left it.
  out = reduce(*r, p, torch::tensor({INFINITY, INFINITY, 0.f, 0.f}), torch::full({}, 8.f), inf);
  CS_CHECK(std::isinf(out.sum().item<float>()));

  // Step 3 after the scale backed off to 2, no new gradient: the residual is
  // rescaled by the new scale (2 x 2 = 4 sent), not sent at the old one, and
  // carries no inf from step 2.
  out = reduce(*r, p, torch::zeros({4}), torch::full({}, 2.f), no_inf);
  CS_CHECK(out.equal(torch::tensor({0.f, 0.f, 4.f, 0.f})));
  CS_CHECK(torch::isfinite(out).all().item<bool>());

  // Step 4 at scale 1 with no found_inf (end_step keeps the new residual
  // unconditionally): what is left, [0, 1, 0, 0.5], gives 1.
  out = reduce(*r, p, torch::zeros({4}), torch::full({}, 1.f), torch::Tensor());
  CS_CHECK(out.equal(torch::tensor({0.f, 1.f, 0.f, 0.f})));

  // Every all-gather was counted, issued and completed.
  const auto prog = commwatch::progress_json();
  CS_CHECK(prog["collectives_issued"].get<int64_t>() == prog["collectives_completed"].get<int64_t>());
  CS_CHECK(prog["collectives_issued"].get<int64_t>() >= 4);
  CS_CHECK(prog["last_op"].get<std::string>() == "all_gather");
  return 0;
}

int deadline_and_aborts() {
  commwatch::reset();
  commwatch::set_deadline_ms(1500);
  CS_CHECK(commwatch::progress_json()["deadline_ms"].get<int>() == 1500);
  bool threw = false;
  try {
    commwatch::set_deadline_ms(0);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  CS_CHECK(threw);
  int aborted = 0;
  const int a = commwatch::on_abort([&] { aborted += 1; });
  const int b = commwatch::on_abort([&] { aborted += 10; });
  commwatch::forget(b);  // a closed communicator is not aborted
  commwatch::issued("all_reduce");
  CS_CHECK(commwatch::progress_json()["pending_ms"].get<double>() >= 0);
  CS_CHECK(!commwatch::has_failed());
  commwatch::failed("first");
  commwatch::failed("second");
  CS_CHECK(commwatch::has_failed());
  CS_CHECK(commwatch::progress_json()["failure"].get<std::string>() == "first");
  commwatch::abort_all();
  commwatch::abort_all();  // once only
  CS_CHECK(aborted == 1);
  commwatch::forget(a);
  commwatch::reset();
  commwatch::set_deadline_ms(600000);
  return 0;
}

}  // namespace

int reducer_tests() {
  int failed = 0;
  failed += run_case("reducer", "top-k residual unscaled, skipped on found_inf", topk_residual_unscaled);
  failed += run_case("reducer", "collective deadline and the abort registry", deadline_and_aborts);
  return failed;
}
