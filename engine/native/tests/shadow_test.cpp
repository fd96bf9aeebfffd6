// shadow_test.cpp: the stretch calibration's Gloo group (shadow_group.h,
// CASESTUDY_INTERFERE=gloo:N) and the wire copy every Gloo collective of the
// engine goes through (gloo_group.h's on_wire), on CPU Gloo in this process.
// ShadowGroup's all-reduce leaves rank 0's tensor as it was (the helpers give
// zeros), fp32 and bf16; its all-gather (top-k compression's, under the
// calibration) gives the world of one's gather (in itself) or the group's
// whole gather, in followed by the helpers' zeros, checked exactly against
// that direct computation, also right after an all-reduce of the same size
// and dtype (whose sum a helper's buffer still holds). Because the helpers
// give zeros, those all-reduce checks cannot see a skipped collective or a
// lost copy-back (issue 39's review); the group case does: 2 and 3 GlooGroup
// ranks, threads over one store, each all-reducing its own non-zero values
// through on_wire as comm_gloo.cpp does (one rank a transposed fp32 matrix,
// one bf16, a third plain fp32), each result checked in the rank's own tensor
// against the sum computed directly.
#include <torch/torch.h>

#include <chrono>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "native_test.h"

#ifdef CS_WITH_GLOO
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "gloo_group.h"
#include "shadow_group.h"
#endif

using namespace cs;

namespace {

#ifdef CS_WITH_GLOO
bool same(const char* what, const torch::Tensor& got, const torch::Tensor& want) {
  if (got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type() && torch::equal(got, want)) return true;
  std::cerr << "FAIL shadow " << what << ": got " << got.sizes() << " " << got.scalar_type() << ", want "
            << want.sizes() << " " << want.scalar_type()
            << (got.sizes() == want.sizes() ? ", values differ" : "") << "\n";
  return false;
}

// on_wire: the tensor itself when Gloo takes it, else a contiguous fp32
// (bf16) or contiguous copy whose result lands back in t.
int wire() {
  auto t = torch::arange(12, torch::kFloat);
  bool itself = false;
  on_wire(t, [&](const torch::Tensor& w) {
    itself = w.is_same(t);
    w.mul_(2);
  });
  CS_CHECK(itself);
  CS_CHECK(same("on_wire fp32", t, torch::arange(12, torch::kFloat) * 2));

  auto b = torch::arange(12, torch::kFloat).to(torch::kBFloat16);
  torch::ScalarType seen = torch::kBFloat16;
  on_wire(b, [&](const torch::Tensor& w) {
    seen = w.scalar_type();
    w.add_(0.5);
  });
  CS_CHECK(seen == torch::kFloat);
  CS_CHECK(same("on_wire bf16", b, (torch::arange(12, torch::kFloat) + 0.5).to(torch::kBFloat16)));

  auto base = torch::arange(12, torch::kFloat).view({3, 4});
  auto nc = base.t();  // a non-contiguous view: the result must land in base
  bool contiguous = false;
  on_wire(nc, [&](const torch::Tensor& w) {
    contiguous = w.is_contiguous();
    w.neg_();
  });
  CS_CHECK(contiguous);
  CS_CHECK(same("on_wire non-contiguous", base, -torch::arange(12, torch::kFloat).view({3, 4})));
  return 0;
}

// All-reduces on a group of n: rank 0's tensor unchanged (fp32, bf16, a
// non-contiguous view).
int all_reduce(ShadowGroup& g) {
  auto t = torch::randn({1000});
  const auto want = t.clone();
  g.all_reduce(t)->wait();
  CS_CHECK(same("all_reduce fp32", t, want));

  auto b = torch::randn({257}).to(torch::kBFloat16);
  const auto wb = b.clone();
  g.all_reduce(b)->wait();
  CS_CHECK(same("all_reduce bf16", b, wb));

  auto base = torch::randn({8, 5});
  const auto wbase = base.clone();
  g.all_reduce(base.t())->wait();
  CS_CHECK(same("all_reduce non-contiguous", base, wbase));
  return 0;
}

// All-gathers on a group of n, each queued right behind an all-reduce of the
// same size and dtype: the world of one's gather is in, the group's
// whole gather in then n - 1 blocks of zeros.
int all_gather(ShadowGroup& g) {
  const int n = g.ranks();
  struct Case {
    const char* what;
    torch::Tensor in;
  };
  const std::vector<Case> cases = {
      {"fp32 values", torch::randn({37})},
      {"int64 indices", torch::randint(0, 1 << 20, {37}, torch::kLong)},
      {"fp32 2-d", torch::randn({4, 6})},
  };
  for (const auto& c : cases) {
    // The reduce's sum is what a helper's buffer of this size and type holds
    // afterwards: a non-zero one (all ones), so a helper gathering it shows.
    auto sum = torch::ones({c.in.numel()}, c.in.options());
    auto own = torch::empty_like(c.in);
    auto whole = torch::empty({c.in.numel() * n}, c.in.options());
    auto w1 = g.all_reduce(sum);
    auto w2 = g.all_gather(c.in, own);
    auto w3 = g.all_reduce(sum);
    auto w4 = g.all_gather(c.in, whole);
    w1->wait(), w2->wait(), w3->wait(), w4->wait();
    const auto flat = c.in.reshape({-1});
    auto direct = torch::cat({flat, torch::zeros({flat.numel() * (n - 1)}, flat.options())});
    CS_CHECK(same((std::string("all_gather world of one ") + c.what).c_str(), own, c.in));
    CS_CHECK(same((std::string("all_gather group of ") + std::to_string(n) + " " + c.what).c_str(), whole, direct));
  }
  bool refused = false;
  try {
    g.all_gather(torch::zeros({4}), torch::zeros({5}));
  } catch (const CommError&) {
    refused = true;
  }
  CS_CHECK(refused);
  return 0;
}

// The group case's inputs: rank r's tensor of `kind`, rows x cols, with
// values k/4 (1 <= |k| <= 15, signs alternating) that differ from rank to
// rank and are exact in bf16, as are sums of up to 3 of them, so the sum
// checks exactly whatever order Gloo adds in. A transposed tensor is a
// non-contiguous view of its base: its result must land in the base.
enum class Kind { Transposed, BF16, FP32 };
constexpr int64_t kRows = 40, kCols = 25;

torch::Tensor rank_input(int r, Kind kind) {
  auto i = torch::arange(kRows * kCols, torch::kFloat);
  auto v = (torch::remainder(i * 7 + 13 * r, 15) + 1) / 4 * (1 - 2 * torch::remainder(i + r, 2));
  if (kind == Kind::Transposed) return v.view({kCols, kRows}).t();
  auto m = v.view({kRows, kCols}).clone();
  return kind == Kind::BF16 ? m.to(torch::kBFloat16) : m;
}

// n GlooGroup ranks as threads of this process over one HashStore, on the
// loopback as the calibration's; in each of n rounds rank r's input is kind
// (r + round) % n of {transposed, bf16, fp32}, so every rank takes every
// kind. Each rank all-reduces through on_wire and checks its own tensor,
// in place, against the fp32 sum of all the inputs (in its dtype). A rank
// that skipped its collective keeps its input (which the check first shows
// differs from the sum) or leaves the others waiting to the timeout; a lost
// copy-back leaves the transposed and the bf16 tensors as they were. A rank
// whose check fails goes on with the later rounds (the others wait on its
// collectives); the failures are printed once every rank is done.
int group_all_reduce(int n) {
  constexpr int kTimeoutMS = 30000;
  const Kind kinds[] = {Kind::Transposed, Kind::BF16, Kind::FP32};
  std::vector<std::vector<torch::Tensor>> in(static_cast<size_t>(n));  // [round][rank]
  std::vector<torch::Tensor> want(static_cast<size_t>(n));             // [round], fp32
  for (int k = 0; k < n; k++) {
    want[size_t(k)] = torch::zeros({kRows, kCols});
    for (int r = 0; r < n; r++) {
      in[size_t(k)].push_back(rank_input(r, kinds[(r + k) % n]));
      want[size_t(k)] += in[size_t(k)].back().to(torch::kFloat);
    }
  }
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::unique_ptr<GlooGroup>> groups(static_cast<size_t>(n));  // destroyed after every rank is done
  std::vector<std::string> fails(static_cast<size_t>(n));                  // per rank
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; r++) {
    ranks.emplace_back([&, r] {
      std::string& fail = fails[size_t(r)];
      try {
        groups[size_t(r)].reset(
            new GlooGroup(store, r, n, std::chrono::milliseconds(kTimeoutMS), GlooNet::Loopback));
        for (int k = 0; k < n; k++) {
          const auto& t = in[size_t(k)][size_t(r)];
          const auto expect = want[size_t(k)].to(t.scalar_type());
          const std::string what = "round " + std::to_string(k) + " " + c10::toString(t.scalar_type()) +
                                   (t.is_contiguous() ? "" : " transposed");
          if (torch::equal(t, expect)) fail += "  " + what + ": the input is already the sum\n";
          on_wire(t, [&](const torch::Tensor& w) { groups[size_t(r)]->allreduce(w).wait(); });
          if (!torch::equal(t, expect))
            fail += "  " + what + ": not the sum in place (max |got - sum| " +
                    std::to_string((t.to(torch::kFloat) - want[size_t(k)]).abs().max().item<double>()) + ")\n";
        }
      } catch (const std::exception& e) {
        fail += std::string("  ") + e.what() + "\n";
      } catch (...) {
        fail += "  an exception that is not a std::exception\n";
      }
    });
  }
  for (auto& t : ranks) t.join();
  int failed = 0;
  for (int r = 0; r < n; r++) {
    if (fails[size_t(r)].empty()) continue;
    std::cerr << "FAIL shadow GlooGroup all_reduce group of " << n << " rank " << r << ":\n" << fails[size_t(r)];
    failed = 1;
  }
  return failed;
}
#endif

}  // namespace

int shadow_tests() {
#ifdef CS_WITH_GLOO
  int failed = run_case("shadow", "on_wire", wire);
  for (int n : {2, 3}) {
    failed |= run_case("shadow", "GlooGroup all_reduce of " + std::to_string(n) + " ranks, non-zero",
                       [&] { return group_all_reduce(n); });
    ShadowGroup g(n);
    failed |= run_case("shadow", "all_reduce group of " + std::to_string(n), [&] { return all_reduce(g); });
    failed |= run_case("shadow", "all_gather group of " + std::to_string(n), [&] { return all_gather(g); });
  }
  std::cout << "shadow: on_wire, GlooGroup all-reduces of 2 and 3 thread ranks (transposed, bf16, fp32; non-zero), "
               "and the stretch calibration's group of 2 and 3 (all-reduce, all-gather) against the direct "
               "computation on CPU Gloo"
            << std::endl;
  return failed;
#else
  // On stdout too: a build without Gloo must not pass as if the group were tested.
  std::cout << "shadow: no Gloo in this build (CS_WITH_GLOO unset): the calibration's group was not tested"
            << std::endl;
  return 0;
#endif
}
