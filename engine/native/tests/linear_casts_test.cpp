// linear_casts_test.cpp: LinearCasts (src/linear_casts.h) and its "cast"
// kernel: 70 fp32 tensors (more than one launch's 64) of sizes from 1 to
// 5,000, some at an offset that breaks the kernel's vector alignment, cast at
// once must equal their .to(dtype) bit for bit; linear_act under the casts
// must use them (served) and give the same bits as without; a tensor modified
// after the cast, or cast to another dtype, is not served. On the CPU through
// the kernel's host version, on CUDA through the kernel.
#include <torch/torch.h>

#include <iostream>

#include "compat.h"
#include "kernels.h"
#include "linear_act.h"
#include "linear_casts.h"
#include "native_test.h"

using namespace cs;

namespace {

int check_device(torch::Device dev, at::ScalarType dt) {
  torch::manual_seed(11);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  std::vector<torch::Tensor> ts;
  for (int i = 0; i < 70; i++) {
    const int64_t n = 1 + torch::randint(5000, {1}).item<int64_t>();
    auto t = torch::randn({n + 1}, f32) * 100;
    ts.push_back(i % 3 == 0 ? t.narrow(0, 1, n) : t.narrow(0, 0, n));  // every third: misaligned
  }
  compat::set_autocast(dev.type(), true, dt);
  {
    LinearCasts casts(ts);
    CS_CHECK(casts.size() == ts.size());
    for (const auto& t : ts) CS_CHECK(torch::equal(LinearCasts::cast(t, dt), t.to(dt)));
    CS_CHECK(casts.served() == int64_t(ts.size()));
    // Another dtype, or the tensor modified since: cast afresh, not served.
    const auto other = dt == torch::kBFloat16 ? torch::kHalf : torch::kBFloat16;
    CS_CHECK(LinearCasts::cast(ts[1], other).scalar_type() == other);
    ts[2].mul_(2);
    CS_CHECK(torch::equal(LinearCasts::cast(ts[2], dt), ts[2].to(dt)));
    CS_CHECK(casts.served() == int64_t(ts.size()));
  }
  // linear_act takes its weight and bias from the casts: the same bits.
  auto x = torch::randn({37, 48}, f32), w = torch::randn({64, 48}, f32) * 0.1,
       b = torch::randn({64}, f32);
  auto y0 = linear_act(x, w, b, Act::GeluTanh);
  torch::Tensor y1;
  int64_t served = 0;
  {
    LinearCasts casts({w, b});
    y1 = linear_act(x, w, b, Act::GeluTanh);
    served = casts.served();
  }
  compat::set_autocast(dev.type(), false, dt);
  at::autocast::clear_cache();
  CS_CHECK(served == 2);
  CS_CHECK(torch::equal(y0, y1));
  // Without autocast a LinearCasts holds nothing.
  LinearCasts none({w, b});
  CS_CHECK(none.size() == 0);
  return 0;
}

}  // namespace

int linear_casts_tests() {
  kernels::set_for_tests("lin,cast");
  int rc = 0;
  {
    HostKernels host;
    rc = run_case("linear_casts", "cpu (host version)", [] { return check_device(torch::kCPU, torch::kBFloat16); });
  }
  if (rc == 0) {
    // Switched off: nothing held.
    kernels::set_for_tests("lin");
    compat::set_autocast(torch::kCPU, true, torch::kBFloat16);
    LinearCasts off({torch::ones({4})});
    compat::set_autocast(torch::kCPU, false, torch::kBFloat16);
    if (off.size() != 0) {
      std::cerr << "FAIL linear_casts: held casts with the kernel off\n";
      rc = 1;
    }
  }
  if (rc == 0) std::cout << "  linear_casts cast kernel's host version cpu ok\n";
  if (rc == 0 && torch::cuda::is_available() && kernels::compiled()) {
    kernels::set_for_tests("lin,cast");
    for (auto dt : {torch::kBFloat16, torch::kHalf}) {
      rc = run_case("linear_casts", std::string("cuda ") + c10::toString(dt),
                    [&] { return check_device(torch::Device(torch::kCUDA, 0), dt); });
      if (rc) break;
    }
    if (rc == 0) std::cout << "  linear_casts cast kernel cuda ok\n";
  }
  kernels::set_for_tests("");
  return rc;
}
