// row_random_test.cpp: the synthetic data is keyed by row (row_random.h), so a
// data-parallel rank's batch equals its slice of a one-rank batch of the
// global size, for every family, and the keyed draws have the distributions
// the families expect.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "model.h"
#include "native_test.h"
#include "row_random.h"

namespace {

namespace kernels = cs::kernels;

bool same(const torch::Tensor& rank, const torch::Tensor& global, int64_t r, int64_t b) {
  if (!rank.defined() || !global.defined()) return rank.defined() == global.defined();
  return torch::equal(rank, global.narrow(0, r * b, b));
}

// RowRandom: rows [r*b, (r+1)*b) of a rank are the same rows of the global
// draw, every kind of draw, at every step; steps and streams differ.
int rank_rows_are_global_rows(torch::Device dev) {
  const int64_t R = 3, b = 4, n = 1000;
  cs::RowRandom global(7, 0, R * b, dev);
  std::vector<cs::RowRandom> ranks;
  for (int64_t r = 0; r < R; ++r) ranks.emplace_back(7, r * b, b, dev);
  for (int step = 0; step < 3; ++step) {
    for (int64_t r = 0; r < R; ++r) {
      auto& k = ranks[size_t(r)];
      CS_CHECK(same(k.bits(0, n), global.bits(0, n), r, b));
      CS_CHECK(same(k.uniform(3, n), global.uniform(3, n), r, b));
      CS_CHECK(same(k.randint(1, n, 5, 50257), global.randint(1, n, 5, 50257), r, b));
      CS_CHECK(same(k.normal(2, n - 1), global.normal(2, n - 1), r, b));
      k.next_step();
    }
    auto before = global.bits(0, n);
    CS_CHECK(!torch::equal(before, global.bits(1, n)));  // streams differ
    global.next_step();
    CS_CHECK(!torch::equal(before, global.bits(0, n)));  // steps differ
  }
  CS_CHECK(!torch::equal(cs::RowRandom(7, 0, 2, dev).bits(0, n), cs::RowRandom(8, 0, 2, dev).bits(0, n)));
  return 0;
}

// The distributions: uniform in [0, 1) with mean 1/2 and variance 1/12,
// randint in range and about flat, normal with mean 0 and variance 1, and
// neighbouring elements and rows uncorrelated.
int distributions(torch::Device dev) {
  cs::RowRandom g(1, 0, 256, dev);
  auto u = g.uniform(0, 1024).to(torch::kDouble).cpu();
  CS_CHECK(u.min().item<double>() >= 0 && u.max().item<double>() < 1);
  CS_CHECK(std::abs(u.mean().item<double>() - 0.5) < 0.005);
  CS_CHECK(std::abs(u.var().item<double>() - 1.0 / 12) < 0.002);
  auto c = u - 0.5;
  const double lag_e = (c.narrow(1, 0, 1023) * c.narrow(1, 1, 1023)).mean().item<double>() * 12;
  const double lag_r = (c.narrow(0, 0, 255) * c.narrow(0, 1, 255)).mean().item<double>() * 12;
  CS_CHECK(std::abs(lag_e) < 0.01 && std::abs(lag_r) < 0.01);
  auto i = g.randint(1, 1024, 3, 13).cpu();
  CS_CHECK(i.min().item<int64_t>() == 3 && i.max().item<int64_t>() == 12);
  auto counts = torch::bincount(i.view(-1) - 3).to(torch::kDouble);
  CS_CHECK((counts / counts.mean() - 1).abs().max().item<double>() < 0.05);
  auto z = g.normal(2, 1023).to(torch::kDouble).cpu();
  CS_CHECK(std::isfinite(z.abs().max().item<double>()));
  CS_CHECK(std::abs(z.mean().item<double>()) < 0.01);
  CS_CHECK(std::abs(z.var().item<double>() - 1) < 0.01);
  return 0;
}

// Every family: rank r of R with micro-batch b draws, step after step,
// exactly rows [r*b, (r+1)*b) of what one rank with micro-batch R*b draws.
int family_rank_batches(torch::Device dev) {
  const int64_t R = 2, b = 2;
  for (const std::string name : {"gpt", "bert", "resnet50"}) {
    for (const bool channels_last : {false, true}) {
      if (channels_last && name != "resnet50") continue;
      cs::ModelConfig c;
      c.family = name;
      c.preset = "tiny";
      c.seed = 3;
      c.channels_last = channels_last;
      c.micro_batch = R * b;
      auto global = cs::family(name).data(c, dev, 0, 1);
      c.micro_batch = b;
      std::vector<std::unique_ptr<cs::DataSource>> ranks;
      for (int64_t r = 0; r < R; ++r) ranks.push_back(cs::family(name).data(c, dev, r, R));
      for (int step = 0; step < 3; ++step) {
        const cs::Batch g = global->next();
        for (int64_t r = 0; r < R; ++r) {
          const cs::Batch k = ranks[size_t(r)]->next();
          if (!same(k.input, g.input, r, b) || !same(k.target, g.target, r, b) || !same(k.aux, g.aux, r, b) ||
              !same(k.aux_target, g.aux_target, r, b)) {
            std::cerr << "FAIL " << name << (channels_last ? " channels_last" : "") << " step " << step
                      << " rank " << r << ": its batch is not its rows of the global batch\n";
            return 1;
          }
          if (channels_last) CS_CHECK(k.input.is_contiguous(at::MemoryFormat::ChannelsLast));
        }
      }
    }
  }
  return 0;
}

// The "rand" kernel (cuda/row_random.cu; on the CPU its host loop) against
// the tensor ops, its reference: bits, uniform and randint equal bit for bit;
// normal within 2^-20 of the reference's magnitude, element by element. That
// bound: with logf within 1 ulp and cosf, sinf within 2 ulp on each side
// (CUDA's documented maxima; libdevice's on the GPU for both, the C library's
// and Sleef's here) and sqrt and the products correctly rounded, each side's
// r cos theta is within (2^-23 + 2^-22 + 2^-24)|z| of the true value (r's
// relative error at most 2^-24 from log's halved by the root plus 2^-24 its
// own rounding), so the two differ by at most 7 * 2^-23 |z| < 2^-20 |z|
// (theta and u1 equal on both: exact integer and power-of-two operations and
// one identical rounded product). It prints how many differ at all: none
// where both sides' libdevice is the same code.
int kernel_is_tensor_ops(torch::Device dev) {
  if (dev.is_cuda() && !kernels::compiled()) {
    std::cout << "  row_random: this build has no rand kernel; nothing to compare\n";
    return 0;
  }
  HostKernels host(dev.is_cpu());
  struct Restore {  // the switch as the environment set it, however the case returns
    ~Restore() {
      const char* v = std::getenv("CASESTUDY_KERNELS");
      kernels::set_for_tests(v ? v : "");
    }
  } restore;
  struct Shape {
    uint64_t seed;
    int64_t row0, rows, per_row;
  };
  const uint64_t big = 0x9E3779B97F4A7C15ULL * 3 + 1;  // ResNet's seed of 3: high bits set
  std::vector<Shape> shapes{{7, 0, 3, 1}, {7, 5, 4, 7}, {big, (int64_t(1) << 32) - 2, 5, 1001},
                            {big, 2 * 384, dev.is_cuda() ? 384 : 4, 3 * 224 * 224}};
  if (dev.is_cuda()) shapes.push_back({11, 3, 70000, 3});  // rows past the grid's 65,535
  int64_t differ = 0, total = 0;
  double worst = 0;
  for (const auto& sh : shapes) {
    cs::RowRandom ref(sh.seed, sh.row0, sh.rows, dev), got(sh.seed, sh.row0, sh.rows, dev);
    for (int step = 0; step < 3; ++step) {
      for (const uint32_t stream : {0u, 1u, 5u}) {
        const int64_t n = sh.per_row;
        kernels::set_for_tests("-rand");
        CS_CHECK(!kernels::enabled("rand"));
        auto rb = ref.bits(stream, n), ru = ref.uniform(stream, n), rz = ref.normal(stream, n);
        auto ri = ref.randint(stream, n, 5, 50257), rw = ref.randint(stream, n, -3, (int64_t(1) << 31) - 3);
        kernels::set_for_tests("rand");
        CS_CHECK(kernels::enabled("rand"));
        auto gb = got.bits(stream, n), gu = got.uniform(stream, n), gz = got.normal(stream, n);
        auto gi = got.randint(stream, n, 5, 50257), gw = got.randint(stream, n, -3, (int64_t(1) << 31) - 3);
        CS_CHECK(gb.dtype() == torch::kInt64 && gi.dtype() == torch::kInt64 && gu.dtype() == torch::kFloat &&
                 gz.dtype() == torch::kFloat && gz.sizes() == rz.sizes() && gz.is_contiguous());
        CS_CHECK(torch::equal(gb, rb) && torch::equal(gu, ru) && torch::equal(gi, ri) && torch::equal(gw, rw));
        auto d = (gz.to(torch::kDouble) - rz.to(torch::kDouble)).abs(), mag = rz.to(torch::kDouble).abs();
        CS_CHECK((d <= mag * std::ldexp(1.0, -20)).all().item<bool>());
        differ += (d > 0).sum().item<int64_t>();
        total += d.numel();
        worst = std::max(worst, (d / mag.clamp_min(1e-30)).max().item<double>());
      }
      ref.next_step();
      got.next_step();
    }
  }
  std::cout << "  row_random rand kernel" << (dev.is_cuda() ? " (cuda)" : " (host loop)")
            << ": bits, uniform, randint equal; normal: " << differ << " of " << total
            << " differ, worst |d| / |z| " << worst << " (bound 2^-20 = " << std::ldexp(1.0, -20) << ")\n";
  return 0;
}

}  // namespace

int row_random_tests() {
  int failed = 0;
  std::vector<torch::Device> devs{torch::kCPU};
  if (torch::cuda::is_available()) devs.emplace_back(torch::kCUDA, 0);
  for (const auto& dev : devs) {
    const std::string on = dev.is_cuda() ? " (cuda)" : " (cpu)";
    failed += run_case("row_random", "rank rows are global rows" + on, [&] { return rank_rows_are_global_rows(dev); });
    failed += run_case("row_random", "distributions" + on, [&] { return distributions(dev); });
    failed += run_case("row_random", "family rank batches" + on, [&] { return family_rank_batches(dev); });
    failed += run_case("row_random", "rand kernel = tensor ops" + on, [&] { return kernel_is_tensor_ops(dev); });
  }
  return failed;
}
