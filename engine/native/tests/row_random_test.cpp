// row_random_test.cpp: the synthetic data is keyed by row (row_random.h), so a
// data-parallel rank's batch equals its slice of a one-rank batch of the
// global size, for every family, and the keyed draws have the distributions
// the families expect.
#include <cmath>
#include <string>

#include "model.h"
#include "native_test.h"
#include "row_random.h"

namespace {

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
  }
  return failed;
}
