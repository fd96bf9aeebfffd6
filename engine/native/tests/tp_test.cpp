// tp_test.cpp: tensor and sequence parallelism's layers (src/tp.h) against the
// full computation, in the style of Megatron's and fairscale's model-parallel
// tests: every rank builds the full master weights and inputs from one seed,
// runs its shard, and compares its output and its share of dW, db and dX with
// the full layer's, fp32, relative error below 1e-6. Ranks are threads, each a
// rank of the engine's own Gloo groups (make_gloo_pipe_groups over a c10d
// TCPStore on the loopback, as the pipeline and the tensor mesh build them in
// the engine: the same Gloo code, headers and flags), at tensor degrees 2, 3
// and 4. Also the engine's GPT (gpt.cpp) at tp 2, 3 and 4 and BERT (bert.cpp)
// at tp 2, 4 and tp 2 x dp 2 against degree 1,
// the mesh's rank layout and the dropout seeds.
//
// The suite never ends silently: it prints each case before running it
// (flushed), a watchdog ends the process with the case's name when one runs
// past kCaseLimitS (a collective that never completes), and a fatal signal
// names the case it hit.
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <execinfo.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "native_test.h"
#include "timed_group.h"
#include "tp.h"
#include "tp_model.h"
#include "zero.h"

#ifdef CS_WITH_GLOO
#include "gloo_world.h"
#include "pipeline_group.h"
#endif

using namespace cs;
#ifdef CS_WITH_GLOO
using cs::test::World;
#endif

namespace {

constexpr double kTol = 1e-6;

// The full tensors every rank draws alike (a generator of its own per call:
// the ranks are threads, the global generator is shared).
torch::Tensor randn(std::vector<int64_t> sizes, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return torch::randn(sizes, gen, torch::kFloat);
}

// Prints and fails when ||a - b|| / ||b|| ≥ kTol.
bool close(const char* what, int rank, const torch::Tensor& a, const torch::Tensor& b,
           double tol = kTol) {
  if (a.sizes() != b.sizes()) {
    std::cerr << "FAIL tp " << what << " (rank " << rank << "): shape " << a.sizes() << " vs "
              << b.sizes() << "\n";
    return false;
  }
  const double e = rel_err(a, b);
  if (e < tol) return true;
  std::cerr << "FAIL tp " << what << " (rank " << rank << "): relative error " << e << "\n";
  return false;
}

#define TP_CLOSE(what, a, b) \
  do {                       \
    if (!close(what, r, a, b)) return 1; \
  } while (0)

// The case running now, for the watchdog and the signal handler.
std::mutex current_mu;
char current_case[160] = "none";
std::atomic<int64_t> case_started_ms{0};
constexpr int kCaseLimitS = 90;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void begin_case(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(current_mu);
    std::snprintf(current_case, sizeof current_case, "%s", what.c_str());
  }
  case_started_ms = now_ms();
  std::cout << "  tp case: " << what << std::endl;
}

// The thread rank running on this thread (-1: not a rank: the main thread,
// the watchdog, Gloo's worker and loop threads, libtorch's own).
thread_local int tl_rank = -1;

void write_str(const char* s) { (void)!write(2, s, std::strlen(s)); }

void write_num(uint64_t v, int base = 10) {
  char buf[24];
  int i = sizeof buf;
  do {
    buf[--i] = "0123456789abcdef"[v % uint64_t(base)];
    v /= uint64_t(base);
  } while (v > 0 && i > 0);
  (void)!write(2, buf + i, sizeof buf - size_t(i));
}

// Names the case, the signal, the faulting address, the thread (a rank or
// not) and its stack (glibc's backtrace, loaded before any fault: the symbols
// are the libraries' dynamic ones; c++filt demangles them), then re-raises.
// It runs on an alternate stack where the thread installed one (the main
// thread and every rank thread: use_alt_stack), so a stack overflow reports too.
void on_fatal_signal(int sig, siginfo_t* info, void*) {
  write_str("tp: fatal signal ");
  write_num(uint64_t(sig));
  write_str(" in case: ");
  write_str(current_case);
  write_str("\n  address 0x");
  write_num(uint64_t(reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr)), 16);
  write_str(", thread ");
  write_num(uint64_t(syscall(SYS_gettid)));
  if (tl_rank >= 0) {
    write_str(" (rank ");
    write_num(uint64_t(tl_rank));
    write_str(" of the case)\n");
  } else {
    write_str(" (not a rank thread: main, watchdog, Gloo's or libtorch's)\n");
  }
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// An alternate signal stack for this thread, kept for its lifetime.
void use_alt_stack() {
  struct Alt {
    Alt() : mem(size_t(64) << 10) {
      stack_t ss{};
      ss.ss_sp = mem.data();
      ss.ss_size = mem.size();
      sigaltstack(&ss, nullptr);
    }
    ~Alt() {  // off before the memory goes
      stack_t ss{};
      ss.ss_flags = SS_DISABLE;
      sigaltstack(&ss, nullptr);
    }
    std::vector<char> mem;
  };
  thread_local Alt alt;
  (void)alt;
}

void install_fatal_handlers() {
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  use_alt_stack();
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) sigaction(sig, &sa, nullptr);
}

// Ends the process, naming the case, when one runs past kCaseLimitS.
class Watchdog {
 public:
  Watchdog() : thread_([this] { run(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) {
      const int64_t started = case_started_ms.load();
      if (started > 0 && now_ms() - started > kCaseLimitS * 1000) {
        std::lock_guard<std::mutex> c(current_mu);
        std::cerr << "FAIL tp: case \"" << current_case << "\" still running after " << kCaseLimitS
                  << " s (a collective that never completed?); exiting" << std::endl;
        std::cout << "FAIL tp (watchdog)" << std::endl;
        std::_Exit(3);
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

#ifdef CS_WITH_GLOO
// Runs body(groups, rank) on n thread ranks, each with its groups of parts
// (make_gloo_pipe_groups); 0 when every rank returned 0.
int on_threads(const std::string& name, int n, const std::vector<Partition>& parts,
               const std::function<int(std::vector<std::unique_ptr<PipeGroup>>&, int)>& body) {
  World world(n);
  std::atomic<int> failed{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; r++) {
    ranks.emplace_back([&, r] {
      tl_rank = r;
      use_alt_stack();
      int rc = 1;
      try {
        auto groups = make_gloo_pipe_groups(world.rank(r), parts);
        rc = body(groups, r);
      } catch (const std::exception& e) {
        std::cerr << "FAIL tp " << name << " (rank " << r << "): " << e.what() << "\n";
      }
      if (rc) failed++;
    });
  }
  for (auto& t : ranks) t.join();
  return failed ? 1 : 0;
}

// Runs body(context, rank) on n thread ranks of one Gloo group; 0 when every
// rank returned 0.
int on_ranks(const std::string& name, int n, bool sp,
             const std::function<int(const tp::Context&, int)>& body) {
  begin_case(name + " tp " + std::to_string(n) + (sp ? " sequence parallel" : ""));
  Partition all(1);
  for (int r = 0; r < n; r++) all[0].push_back(r);
  const int failed = on_threads(name, n, {all}, [&](std::vector<std::unique_ptr<PipeGroup>>& groups, int r) {
    tp::Context c;
    c.group = groups.at(0).get();
    c.sequence_parallel = sp;
    return body(c, r);
  });
  if (failed) std::cerr << "  case " << name << " tp " << n << (sp ? " sequence parallel" : "") << "\n";
  return failed;
}

// Issue 39's race: n thread ranks, each with `groups` fresh Gloo groups of all
// n, every rank issuing on every group at once, `rounds` times. Each group's
// first collective registers it in torch 2.x's process-global flight recorder
// (a std::map that torch ~2.11 fills before taking its lock); without
// gloo_issue's process-wide lock this crashed the tp suite on the H100 host.
// The sums are checked too. It cannot fail on libtorch 1.13 (no recorder):
// the gpu-check tests stage runs it on the torch that raced.
int concurrent_groups(int n, int groups, int rounds) {
  begin_case("concurrent fresh groups tp " + std::to_string(n));
  std::vector<Partition> parts(size_t(groups), Partition(1));
  for (auto& p : parts)
    for (int r = 0; r < n; r++) p[0].push_back(r);
  return on_threads("concurrent groups", n, parts, [&](std::vector<std::unique_ptr<PipeGroup>>& gs, int r) {
    for (int k = 0; k < rounds; k++)
      for (size_t g = 0; g < gs.size(); g++) {
        auto t = torch::full({64}, double(r + 1 + int64_t(g) * k), torch::kFloat);
        gs[g]->all_reduce_sum(t);
        const double want = double(n) * (n + 1) / 2 + double(n) * double(g) * k;
        if (!torch::equal(t, torch::full({64}, want, torch::kFloat))) {
          std::cerr << "FAIL tp concurrent groups (rank " << r << ", group " << g << ", round " << k
                    << "): sum " << t[0].item<double>() << ", want " << want << "\n";
          return 1;
        }
      }
    return 0;
  });
}

constexpr int64_t B = 2, T = 8, IN = 12, OUT = 16;

// Column-parallel linear: output columns, dW rows, db, and the all-reduced dX.
int column(const tp::Context& c, int r) {
  const int n = c.size();
  auto x = randn({B, T, IN}, 1), w = randn({OUT, IN}, 2), b = randn({OUT}, 3), gy = randn({B, T, OUT}, 4);
  auto X = x.clone().requires_grad_(), W = w.clone().requires_grad_(), Bb = b.clone().requires_grad_();
  auto Y = torch::linear(X, W, Bb);
  (Y * gy).sum().backward();

  // Sequence parallel: the input arrives split along the sequence, the input
  // gradient leaves split the same way.
  auto xs = (c.sequence_parallel ? tp::shard(x, 1, r, n) : x.clone()).requires_grad_();
  auto ws = tp::shard(w, 0, r, n).requires_grad_(), bs = tp::shard(b, 0, r, n).requires_grad_();
  auto y = tp::column_parallel_linear(xs, ws, bs, c);
  TP_CLOSE("column output", y, tp::shard(Y, -1, r, n));
  (y * tp::shard(gy, -1, r, n)).sum().backward();
  TP_CLOSE("column dW", ws.grad(), tp::shard(W.grad(), 0, r, n));
  TP_CLOSE("column db", bs.grad(), tp::shard(Bb.grad(), 0, r, n));
  TP_CLOSE("column dX", xs.grad(), c.sequence_parallel ? tp::shard(X.grad(), 1, r, n) : X.grad());
  // gather_from reassembles the full output; its backward hands back the shard.
  auto xg = (c.sequence_parallel ? tp::shard(x, 1, r, n) : x.clone()).requires_grad_();
  auto full = tp::gather_from(tp::column_parallel_linear(xg, ws.detach(), bs.detach(), c), c.group);
  TP_CLOSE("column gathered output", full, Y);
  (full * gy).sum().backward();
  TP_CLOSE("column gathered dX", xg.grad(),
           c.sequence_parallel ? tp::shard(X.grad(), 1, r, n) : X.grad());
  return 0;
}

// Row-parallel linear: the input split by columns, the full output (sequence
// parallel: the rank's sequence shard), dW columns, the full db (sequence
// parallel: after the all-reduce of the bias's gradient), dX's columns.
int row(const tp::Context& c, int r) {
  const int n = c.size();
  auto x = randn({B, T, OUT}, 5), w = randn({IN, OUT}, 6), b = randn({IN}, 7), gy = randn({B, T, IN}, 8);
  auto X = x.clone().requires_grad_(), W = w.clone().requires_grad_(), Bb = b.clone().requires_grad_();
  auto Y = torch::linear(X, W, Bb);
  (Y * gy).sum().backward();

  auto xs = tp::shard(x, -1, r, n).requires_grad_();
  auto ws = tp::shard(w, 1, r, n).requires_grad_(), bs = b.clone().requires_grad_();
  auto y = tp::row_parallel_linear(xs, ws, bs, c);
  auto want = c.sequence_parallel ? tp::shard(Y, 1, r, n) : Y;
  TP_CLOSE("row output", y, want);
  (y * (c.sequence_parallel ? tp::shard(gy, 1, r, n) : gy)).sum().backward();
  TP_CLOSE("row dW", ws.grad(), tp::shard(W.grad(), 1, r, n));
  if (c.sequence_parallel) {
    // Before the all-reduce the bias gradient covers this rank's sequence shard only.
    if (rel_err(bs.grad(), Bb.grad()) < kTol) {
      std::cerr << "FAIL tp row db: equal to the full gradient before the all-reduce\n";
      return 1;
    }
    tp::allreduce_sequence_parallel_grads({bs}, c);
  }
  TP_CLOSE("row db", bs.grad(), Bb.grad());
  TP_CLOSE("row dX", xs.grad(), tp::shard(X.grad(), -1, r, n));
  return 0;
}

// Causal self-attention with the heads split: fused QKV column-parallel
// (shard_qkv), heads/tp heads per rank, the projection row-parallel.
torch::Tensor attention(const torch::Tensor& x, const torch::Tensor& wqkv, const torch::Tensor& bqkv,
                        const torch::Tensor& wo, const torch::Tensor& bo, int64_t heads,
                        const tp::Context& c) {
  auto qkv = tp::column_parallel_linear(x, wqkv, bqkv, c);  // [B, T, 3 d/tp]
  const int64_t b = qkv.size(0), t = qkv.size(1), dl = qkv.size(2) / 3, hd = dl / heads;
  auto parts = qkv.split(dl, -1);
  auto heads_of = [&](const torch::Tensor& z) { return z.reshape({b, t, heads, hd}).transpose(1, 2); };
  auto q = heads_of(parts[0]), k = heads_of(parts[1]), v = heads_of(parts[2]);
  auto att = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(hd));
  auto mask = torch::ones({t, t}, torch::kBool).triu(1);
  att = torch::softmax(att.masked_fill(mask, -std::numeric_limits<float>::infinity()), -1);
  auto y = torch::matmul(att, v).transpose(1, 2).reshape({b, t, dl});
  return tp::row_parallel_linear(y, wo, bo, c);
}

int heads(const tp::Context& c, int r) {
  const int n = c.size();
  constexpr int64_t D = 16, H = 4;
  auto x = randn({B, T, D}, 9), wqkv = randn({3 * D, D}, 10) * 0.3, bqkv = randn({3 * D}, 11),
       wo = randn({D, D}, 12), bo = randn({D}, 13), gy = randn({B, T, D}, 14);
  auto X = x.clone().requires_grad_(), Wqkv = wqkv.clone().requires_grad_(),
       Bqkv = bqkv.clone().requires_grad_(), Wo = wo.clone().requires_grad_(), Bo = bo.clone().requires_grad_();
  auto Y = attention(X, Wqkv, Bqkv, Wo, Bo, H, tp::Context{});
  (Y * gy).sum().backward();

  // Sequence parallel: input, output and dX are the rank's sequence shards.
  auto seq = [&](const torch::Tensor& t) { return c.sequence_parallel ? tp::shard(t, 1, r, n) : t; };
  auto xs = seq(x).requires_grad_();
  auto wq = tp::shard_qkv(wqkv, r, n).requires_grad_(), bq = tp::shard_qkv(bqkv, r, n).requires_grad_();
  auto wos = tp::shard(wo, 1, r, n).requires_grad_(), bos = bo.clone().requires_grad_();
  auto y = attention(xs, wq, bq, wos, bos, H / n, c);
  TP_CLOSE("attention output", y, seq(Y));
  (y * seq(gy)).sum().backward();
  tp::allreduce_sequence_parallel_grads({bos}, c);
  TP_CLOSE("attention dWqkv", wq.grad(), tp::shard_qkv(Wqkv.grad(), r, n));
  TP_CLOSE("attention dbqkv", bq.grad(), tp::shard_qkv(Bqkv.grad(), r, n));
  TP_CLOSE("attention dWo", wos.grad(), tp::shard(Wo.grad(), 1, r, n));
  TP_CLOSE("attention dbo", bos.grad(), Bo.grad());
  TP_CLOSE("attention dX", xs.grad(), seq(X.grad()));
  return 0;
}

// Vocabulary-parallel embedding: the full embedding (sequence parallel: the
// rank's sequence shard) and the rank's rows of dW.
int embedding(const tp::Context& c, int r) {
  const int n = c.size();
  constexpr int64_t V = 24, D = 8;
  auto gen = at::detail::createCPUGenerator(15);
  auto ids = torch::randint(0, V, {B, T}, gen, torch::kLong);
  auto w = randn({V, D}, 16), gy = randn({B, T, D}, 17);
  auto W = w.clone().requires_grad_();
  auto Y = torch::embedding(W, ids);
  (Y * gy).sum().backward();

  auto ws = tp::shard(w, 0, r, n).requires_grad_();
  auto y = tp::vocab_parallel_embedding(ids, ws, c);
  TP_CLOSE("embedding output", y, c.sequence_parallel ? tp::shard(Y, 1, r, n) : Y);
  (y * (c.sequence_parallel ? tp::shard(gy, 1, r, n) : gy)).sum().backward();
  TP_CLOSE("embedding dW", ws.grad(), tp::shard(W.grad(), 0, r, n));
  return 0;
}

// Vocabulary-parallel cross-entropy behind GPT's tied head: per-row losses,
// the rank's rows of d(wte), and dh.
int cross_entropy(const tp::Context& c, int r) {
  const int n = c.size();
  constexpr int64_t V = 32, D = 8;
  auto gen = at::detail::createCPUGenerator(18);
  auto target = torch::randint(0, V, {B, T}, gen, torch::kLong);
  auto h = randn({B, T, D}, 19), w = randn({V, D}, 20) * 2.0;
  auto H = h.clone().requires_grad_(), W = w.clone().requires_grad_();
  auto L = torch::nn::functional::cross_entropy(
      torch::linear(H, W).reshape({-1, V}), target.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  L.mean().backward();

  auto hs = (c.sequence_parallel ? tp::shard(h, 1, r, n) : h.clone()).requires_grad_();
  auto ws = tp::shard(w, 0, r, n).requires_grad_();
  auto logits = tp::parallel_lm_logits(hs, ws, c);  // [B, T, V/tp]
  TP_CLOSE("lm logits", logits, tp::shard(torch::linear(h, w), -1, r, n));
  auto l = tp::vocab_parallel_cross_entropy(logits.reshape({-1, V / n}), target.reshape({-1}), c.group);
  TP_CLOSE("cross-entropy loss", l, L.detach());
  l.mean().backward();
  TP_CLOSE("cross-entropy dW", ws.grad(), tp::shard(W.grad(), 0, r, n));
  TP_CLOSE("cross-entropy dh", hs.grad(), c.sequence_parallel ? tp::shard(H.grad(), 1, r, n) : H.grad());
  return 0;
}

// The conjugate pairs themselves: scatter_to / gather_from and the sequence
// functions with their backward.
int conjugates(const tp::Context& c, int r) {
  const int n = c.size();
  auto x = randn({B, T, OUT}, 21), gy = randn({B, T, OUT}, 22);
  auto xs = x.clone().requires_grad_();
  auto s = tp::scatter_to(xs, c.group);
  TP_CLOSE("scatter_to", s, tp::shard(x, -1, r, n));
  (s * tp::shard(gy, -1, r, n)).sum().backward();
  // d/dx of the rank's block: the all-gather of every rank's block of gy = gy.
  TP_CLOSE("scatter_to backward", xs.grad(), gy);

  auto xr = x.clone().requires_grad_();
  auto y = tp::scatter_to_seq(xr, c.group, 1);
  TP_CLOSE("scatter_to_seq", y, tp::shard(x, 1, r, n));
  (y * tp::shard(gy, 1, r, n)).sum().backward();
  TP_CLOSE("scatter_to_seq backward", xr.grad(), gy);

  // reduce_from sums the ranks' partials; its backward passes the gradient on.
  auto part = (x * double(r + 1)).requires_grad_();
  auto sum = tp::reduce_from(part, c.group);
  TP_CLOSE("reduce_from", sum, x * double(n * (n + 1) / 2));
  (sum * gy).sum().backward();
  TP_CLOSE("reduce_from backward", part.grad(), gy);
  return 0;
}
// The group's all-gather and reduce-scatter (pipeline_group.h) under tp.h's
// along each dimension, on uneven values: every rank's tensor is its own
// (its seed, scaled by rank + 1, offset by 10 x rank), so a block from the
// wrong rank, in the wrong place or summed twice shows. The all-gather is
// exact (bytes copied: bf16 too); the reduce-scatter is compared with the sum
// of every rank's tensor (float64, then the dtype). Sizes that do not fit
// are refused.
int collectives(const tp::Context& c, int r) {
  const int n = c.size();
  PipeGroup& g = *c.group;
  auto of = [&](int k, std::vector<int64_t> sizes, torch::ScalarType dt) {
    return (randn(sizes, 40 + uint64_t(k)) * double(k + 1) + 10.0 * k).to(dt);
  };
  // fp16: the tensor collectives of an fp16 autocast forward carry half
  // activations (Gloo sums them as gloo::float16).
  for (auto dt : {torch::kFloat, torch::kDouble, torch::kBFloat16, torch::kHalf}) {
    const std::string name = c10::toString(dt);
    std::vector<torch::Tensor> all, full;
    for (int k = 0; k < n; k++) all.push_back(of(k, {3, 2, 5}, dt)), full.push_back(of(k, {2 * n, 3, 3 * n}, dt));
    for (int64_t dim : {0, 1, 2, -1}) {
      auto got = tp::all_gather(all[size_t(r)], g, dim);
      if (!torch::equal(got, torch::cat(all, dim))) {
        std::cerr << "FAIL tp all_gather " << name << " dim " << dim << " (rank " << r << ")\n";
        return 1;
      }
    }
    auto sum = torch::zeros_like(full[0], torch::kDouble);
    for (const auto& t : full) sum += t.to(torch::kDouble);
    // A sum of n rounded in the group's dtype: n unit roundoffs (bf16 2^-8, fp16 2^-11).
    const double tol = dt == torch::kBFloat16 ? 1e-2 : dt == torch::kHalf ? 2e-3 : kTol;
    for (int64_t dim : {0, 2, -1}) {
      auto got = tp::reduce_scatter(full[size_t(r)], g, dim);
      if (!close(("reduce_scatter " + name + " dim " + std::to_string(dim)).c_str(), r, got.to(torch::kDouble),
                 tp::shard(sum.to(dt).to(torch::kDouble), dim, r, n), tol))
        return 1;
    }
  }
  // The raw calls: rank-major flat buffers, and sizes that do not fit.
  auto in = of(r, {7}, torch::kFloat);
  auto out = torch::empty({7 * n});
  g.all_gather(in, out);
  for (int k = 0; k < n; k++) CS_CHECK(torch::equal(out.narrow(0, 7 * k, 7), of(k, {7}, torch::kFloat)));
  bool threw = false;
  try {
    g.all_gather(in, torch::empty({7 * n + 1}));
  } catch (const CommError&) {
    threw = true;
  }
  CS_CHECK(threw);
  threw = false;
  try {
    g.reduce_scatter_sum(torch::empty({5 * n}), torch::empty({4}));
  } catch (const CommError&) {
    threw = true;
  }
  CS_CHECK(threw);
  return 0;
}

// The coalesced reductions (pipeline_group.h): coalesced_all_reduce_sum over
// tensors of two dtypes (one all-reduce each), a non-contiguous one among
// them, against the per-tensor sums; average_over_group against the mean.
int coalesced(const tp::Context& c, int r) {
  const int n = c.size();
  PipeGroup& g = *c.group;
  auto of = [&](int k, uint64_t seed, std::vector<int64_t> sizes) {
    return randn(sizes, seed + 100 * uint64_t(k)) * double(k + 1) + double(k);
  };
  std::vector<torch::Tensor> mine{of(r, 50, {4, 3}), of(r, 51, {5}).to(torch::kDouble), of(r, 52, {3, 4}).t(),
                                  of(r, 53, {2, 2}).to(torch::kDouble)};
  std::vector<torch::Tensor> want;
  for (size_t i = 0; i < mine.size(); i++) {
    auto w = torch::zeros_like(mine[i], torch::kDouble);
    for (int k = 0; k < n; k++) {
      auto t = i == 0 ? of(k, 50, {4, 3}) : i == 1 ? of(k, 51, {5}) : i == 2 ? of(k, 52, {3, 4}).t() : of(k, 53, {2, 2});
      w += t.to(torch::kDouble);
    }
    want.push_back(w);
  }
  CS_CHECK(!mine[2].is_contiguous());
  CS_CHECK(coalesced_all_reduce_sum(mine, g) == 2);
  for (size_t i = 0; i < mine.size(); i++)
    if (!close(("coalesced all-reduce tensor " + std::to_string(i)).c_str(), r, mine[i].to(torch::kDouble), want[i]))
      return 1;
  std::vector<torch::Tensor> grads{of(r, 60, {6}), of(r, 61, {2, 3})};
  std::vector<torch::Tensor> mean{torch::zeros({6}, torch::kDouble), torch::zeros({2, 3}, torch::kDouble)};
  for (int k = 0; k < n; k++) {
    mean[0] += of(k, 60, {6}).to(torch::kDouble) / double(n);
    mean[1] += of(k, 61, {2, 3}).to(torch::kDouble) / double(n);
  }
  CS_CHECK(average_over_group(grads, g) == 12 * 4);
  for (size_t i = 0; i < grads.size(); i++)
    if (!close(("average over group tensor " + std::to_string(i)).c_str(), r, grads[i].to(torch::kDouble), mean[i]))
      return 1;
  return 0;
}

// A PipeGroup that forwards to one it does not own (for TimedGroup, which owns
// its group, over the case's).
class Borrowed : public PipeGroup {
 public:
  explicit Borrowed(PipeGroup& g) : g_(g) {}
  int rank() const override { return g_.rank(); }
  int size() const override { return g_.size(); }
  void exchange(const std::vector<P2POp>& ops) override { g_.exchange(ops); }
  void all_reduce_sum(torch::Tensor t) override { g_.all_reduce_sum(t); }
  void all_gather(const torch::Tensor& in, torch::Tensor out) override { g_.all_gather(in, out); }
  void reduce_scatter_sum(const torch::Tensor& in, torch::Tensor out) override { g_.reduce_scatter_sum(in, out); }

 private:
  PipeGroup& g_;
};

// ZeRO's view of a data group (zero.h group_communicator): the Communicator's
// collectives over the PipeGroup, exact broadcast (bytes, so -0.0 and NaN
// survive), a timed work per collective; tensor_parallel_sumsq's sum over the
// group plus the replicated term once.
int group_comm(const tp::Context& c, int r) {
  const int n = c.size();
  auto comm = group_communicator(*c.group, torch::Device(torch::kCPU), "gloo", "gloo");
  CS_CHECK(comm->rank() == r && comm->world_size() == n && comm->backend() == "gloo");
  auto a = torch::full({10}, double(r + 1));
  auto w = comm->all_reduce_sum(a);
  w->wait();
  CS_CHECK(w->elapsed_ms() >= 0);
  CS_CHECK(torch::equal(a, torch::full({10}, double(n * (n + 1) / 2))));
  auto out = torch::empty({3 * n});
  comm->all_gather(torch::full({3}, float(r)), out)->wait();
  for (int k = 0; k < n; k++) CS_CHECK(torch::equal(out.narrow(0, 3 * k, 3), torch::full({3}, float(k))));
  auto in = torch::arange(2 * n, torch::kFloat) * float(r + 1), block = torch::empty({2});
  comm->reduce_scatter_sum(in, block)->wait();
  const float tri = float(n * (n + 1) / 2);
  CS_CHECK(torch::equal(block, torch::tensor({2.0f * r * tri, (2.0f * r + 1) * tri})));
  // Broadcast from the last rank, a 2-d tensor holding -0.0 and NaN.
  auto b = torch::full({2, 3}, float(r));
  if (r == n - 1) b[0][0] = -0.0f, b[1][2] = std::nanf("");
  comm->broadcast(b, n - 1);
  CS_CHECK(std::signbit(b[0][0].item<float>()) && b[0][0].item<float>() == 0.0f);
  CS_CHECK(std::isnan(b[1][2].item<float>()));
  CS_CHECK(b[0][1].item<float>() == float(n - 1) && b[1][1].item<float>() == float(n - 1));
  comm->barrier();
  // Point to point: rank 0 to rank 1.
  if (r == 0) comm->send(torch::full({4}, 7.0f), 1);
  if (r == 1) {
    auto got = torch::zeros({4});
    comm->recv(got, 0);
    CS_CHECK(torch::equal(got, torch::full({4}, 7.0f)));
  }
  // The tp norm: sharded squares summed over the group, replicated once.
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto s = tp::tensor_parallel_sumsq(torch::full({}, double(r + 1), f64), torch::full({}, 0.5, f64), c.group);
  CS_CHECK(s.dim() == 0 && s.scalar_type() == torch::kFloat64);
  CS_CHECK(s.item<double>() == double(n * (n + 1) / 2) + 0.5);
  CS_CHECK(tp::tensor_parallel_sumsq(torch::full({}, 2.0, f64), torch::full({}, 0.5, f64), nullptr).item<double>() == 2.5);
  // fp16's found_inf agreed over the group: the last rank's replicated
  // gradients overflowed (inf, then nan), which no other rank sees; every
  // rank's total must be non-finite, so every rank skips the step.
  for (double bad : {double(INFINITY), double(NAN)}) {
    auto rep = torch::full({}, r == n - 1 ? bad : 0.5, f64);
    auto t = tp::tensor_parallel_sumsq(torch::full({}, double(r + 1), f64), rep, c.group);
    CS_CHECK(!std::isfinite(t.item<double>()));
    CS_CHECK(clip_grads({}, t, torch::full({}, 1.0 / 65536, torch::kFloat32), 1.0).found_inf.item<float>() == 1.0f);
  }
  // With the group for queued all-gathers (zero.overlap_gather): they run on
  // the communicator's thread in issue order; two in flight at once, waited
  // for in reverse, each wait() leaving its bytes in place.
  auto queued = group_communicator(*c.group, torch::Device(torch::kCPU), "gloo", "gloo", c.group);
  auto o1 = torch::empty({5 * n}), o2 = torch::empty({2 * n}, f64);
  auto w1 = queued->all_gather(torch::full({5}, float(r) + 0.5f), o1);
  auto w2 = queued->all_gather(torch::full({2}, double(-r), f64), o2);
  w2->wait();
  for (int k = 0; k < n; k++) CS_CHECK(torch::equal(o2.narrow(0, 2 * k, 2), torch::full({2}, double(-k), f64)));
  w1->wait();
  for (int k = 0; k < n; k++) CS_CHECK(torch::equal(o1.narrow(0, 5 * k, 5), torch::full({5}, float(k) + 0.5f)));
  CS_CHECK(w1->elapsed_ms() >= 0 && w2->elapsed_ms() >= 0);
  return 0;
}

// TimedGroup (timed_group.h) on the host clock: the collectives of an open
// step counted with their bytes (an all-reduce's tensor, an all-gather's
// output, a reduce-scatter's input) and timed (> 0 each), none outside a
// step; a step of 70 collectives (140 marks, past one chunk of 64) is timed
// whole, and the next step starts from zero. The results are the group's.
int timed(const tp::Context& c, int r) {
  const int n = c.size();
  TimedGroup tg(std::make_unique<Borrowed>(*c.group), torch::Device(torch::kCPU));
  CS_CHECK(tg.rank() == r && tg.size() == n);
  tg.all_reduce_sum(torch::ones({3}));  // before any step: not counted
  tg.begin_step();
  auto a = torch::full({10}, double(r + 1));
  tg.all_reduce_sum(a);
  CS_CHECK(torch::equal(a, torch::full({10}, double(n * (n + 1) / 2))));
  auto out = torch::empty({4 * n});
  tg.all_gather(torch::full({4}, double(r)), out);
  CS_CHECK(out[4 * (n - 1)].item<double>() == double(n - 1));
  auto part = torch::empty({2});
  tg.reduce_scatter_sum(torch::ones({2 * n}), part);
  CS_CHECK(torch::equal(part, torch::full({2}, double(n))));
  tg.end_step();
  tg.all_reduce_sum(torch::ones({3}));  // after the step: not counted
  GroupCommStats s = tg.stats();
  CS_CHECK(s.collectives == 3);
  CS_CHECK(s.bytes == 10 * 4 + 4 * n * 4 + 2 * n * 4);
  CS_CHECK(s.each_ms.size() == 3);
  double sum = 0;
  for (double ms : s.each_ms) {
    CS_CHECK(ms > 0);
    sum += ms;
  }
  CS_CHECK(s.ms == sum);
  tg.begin_step();
  for (int i = 0; i < 70; i++) tg.all_reduce_sum(torch::ones({1}));
  tg.end_step();
  s = tg.stats();
  CS_CHECK(s.collectives == 70 && s.bytes == 70 * 4 && s.each_ms.size() == 70 && s.ms > 0);
  tg.begin_step();
  tg.end_step();
  s = tg.stats();
  CS_CHECK(s.collectives == 0 && s.ms == 0 && s.each_ms.empty());
  return 0;
}

// ---- a tiny GPT-2 built from tp.h: 3 SGD steps against degree 1 -------------
// Two pre-LayerNorm blocks (attention with heads split, GELU MLP), learned
// position embeddings, a vocabulary-parallel embedding tied to the head and
// the vocabulary-parallel cross-entropy; the same code at degree 1 (an empty
// Context: the plain computation) is the reference. Sequence parallelism puts
// the LayerNorms and residual adds on sequence shards and all-reduces their
// parameters' (and the row-parallel biases') gradients over the tensor group.
struct TinyGPT {
  static constexpr int64_t V = 32, D = 16, H = 4, L = 2, S = 8, NB = 4;
  // Per layer: ln1 w, b, qkv w, b, proj w, b, ln2 w, b, fc w, b, fc2 w, b.
  std::vector<torch::Tensor> p;  // wte, wpe, layers..., ln_f w, b
  std::vector<torch::Tensor> seq_params;  // replicated, seeing a sequence shard under SP

  // The rank's shards of the full model every rank draws from seed 30.
  TinyGPT(int r, int n) {
    auto sh = [&](const torch::Tensor& t, int64_t dim) { return tp::shard(t, dim, r, n); };
    uint64_t seed = 30;
    auto w = [&](std::vector<int64_t> s) { return randn(s, seed++) * 0.2; };
    auto ln = [&](bool gain) { return gain ? 1.0 + w({D}) : w({D}); };
    p.push_back(sh(w({V, D}), 0));
    p.push_back(w({S, D}));
    for (int64_t l = 0; l < L; l++) {
      p.push_back(ln(true)), p.push_back(ln(false));
      p.push_back(tp::shard_qkv(w({3 * D, D}), r, n)), p.push_back(tp::shard_qkv(w({3 * D}), r, n));
      p.push_back(sh(w({D, D}), 1)), p.push_back(w({D}));
      p.push_back(ln(true)), p.push_back(ln(false));
      p.push_back(sh(w({4 * D, D}), 0)), p.push_back(sh(w({4 * D}), 0));
      p.push_back(sh(w({D, 4 * D}), 1)), p.push_back(w({D}));
    }
    p.push_back(ln(true)), p.push_back(ln(false));
    for (auto& t : p) t.requires_grad_();
    for (int64_t l = 0; l < L; l++)
      for (int i : {0, 1, 5, 6, 7, 11}) seq_params.push_back(p[size_t(2 + 12 * l + i)]);
    seq_params.push_back(p[p.size() - 2]), seq_params.push_back(p.back());
  }

  torch::Tensor loss(const torch::Tensor& ids, const torch::Tensor& target, const tp::Context& c) {
    const int n = c.size();
    auto pos = p[1].narrow(0, 0, S);
    auto x = tp::vocab_parallel_embedding(ids, p[0], c) +
             (c.sequence_parallel ? tp::scatter_to_seq(pos, c.group, 0) : pos);
    for (int64_t l = 0; l < L; l++) {
      const auto* q = &p[size_t(2 + 12 * l)];
      auto h = torch::layer_norm(x, {D}, q[0], q[1], 1e-5);
      x = x + attention(h, q[2], q[3], q[4], q[5], H / n, c);
      h = torch::layer_norm(x, {D}, q[6], q[7], 1e-5);
      h = torch::gelu(tp::column_parallel_linear(h, q[8], q[9], c), "tanh");
      x = x + tp::row_parallel_linear(h, q[10], q[11], c);
    }
    x = torch::layer_norm(x, {D}, p[p.size() - 2], p.back(), 1e-5);
    auto logits = tp::parallel_lm_logits(x, p[0], c);
    return tp::vocab_parallel_cross_entropy(logits.reshape({-1, V / n}), target.reshape({-1}), c.group)
        .mean();
  }

  // Three SGD steps on one global batch of NB rows; returns the losses. With a
  // data group (tp × dp) the replica takes its NB/dp rows, and the gradients
  // and the loss are averaged over the data group.
  std::vector<double> train(const tp::Context& c, PipeGroup* data = nullptr) {
    const int dp = data ? data->size() : 1, d = data ? data->rank() : 0;
    const int64_t rows = NB / dp;
    std::vector<double> losses;
    for (int step = 0; step < 3; step++) {
      auto gen = at::detail::createCPUGenerator(100);  // one batch: the loss must fall
      auto tokens = torch::randint(0, V, {NB, S + 1}, gen, torch::kLong).narrow(0, d * rows, rows);
      for (auto& t : p) t.mutable_grad() = torch::Tensor();
      auto l = loss(tokens.narrow(1, 0, S), tokens.narrow(1, 1, S), c);
      l.backward();
      tp::allreduce_sequence_parallel_grads(seq_params, c);
      torch::NoGradGuard ng;
      auto lv = l.detach().clone().reshape({1});
      if (data) {
        for (auto& t : p) {
          data->all_reduce_sum(t.mutable_grad());
          t.mutable_grad().div_(dp);
        }
        data->all_reduce_sum(lv);
        lv.div_(dp);
      }
      for (auto& t : p) t.sub_(t.grad(), 0.3);
      losses.push_back(lv.item<double>());
    }
    return losses;
  }
};

// r: the rank in the world; t: its tensor rank.
int check_model(const tp::Context& c, PipeGroup* data, int r) {
  const int n = c.size(), t = c.rank();
  TinyGPT full(0, 1), mine(t, n);
  auto want = full.train(tp::Context{});
  auto got = mine.train(c, data);
  for (size_t i = 0; i < want.size(); i++) {
    if (std::abs(got[i] - want[i]) > 1e-5 * std::abs(want[i])) {
      std::cerr << "FAIL tp model loss of step " << i << " (rank " << r << "): " << got[i] << " vs "
                << want[i] << "\n";
      return 1;
    }
  }
  if (!(want.back() < want.front())) {
    std::cerr << "FAIL tp model: the reference's loss did not fall (" << want.front() << " -> "
              << want.back() << ")\n";
    return 1;
  }
  // The rank's parameters after 3 steps: its shards of the reference's.
  for (size_t i = 0; i < full.p.size(); i++) {
    const auto& f = full.p[i];
    torch::Tensor want_p = f;
    const size_t k = i < 2 ? 12 : (i - 2) % 12;
    if (i == 0) want_p = tp::shard(f, 0, t, n);
    else if (i >= 2 && i < full.p.size() - 2) {
      if (k == 2 || k == 3) want_p = tp::shard_qkv(f, t, n);
      else if (k == 4 || k == 10) want_p = tp::shard(f, 1, t, n);
      else if (k == 8 || k == 9) want_p = tp::shard(f, 0, t, n);
    }
    if (!close(("model parameter " + std::to_string(i)).c_str(), r, mine.p[i].detach(), want_p.detach(),
               1e-5))
      return 1;
  }
  return 0;
}

int model(const tp::Context& c, int r) { return check_model(c, nullptr, r); }

// The engine's own models (gpt.cpp make_gpt_tp, bert.cpp make_bert_tp) on the
// tensor group against the degree-1 model family(mc.family) builds: the same
// tiny config and batch, 3 SGD steps; the losses within 1e-5 and the gathered
// parameters (the checksum's view, in the degree-1 order and layout) within
// 1e-5 relative error each. With a data group (tp x dp) this rank's replica
// reads its data rank's rows of the reference's batch (micro_batch / dp each),
// and the loss and gradients are averaged over the data group.
int engine_case(const tp::Context& c, int r, const ModelConfig& mc, PipeGroup* data = nullptr) {
  const auto cpu = torch::Device(torch::kCPU);
  const int dp = data ? data->size() : 1;
  ModelConfig part = mc;
  part.micro_batch = mc.micro_batch / dp;
  auto full = family(mc.family).build(mc, cpu);
  auto mine = mc.family == "bert" ? make_bert_tp(part, cpu, c) : make_gpt_tp(part, cpu, c);
  auto* tpm = dynamic_cast<TensorParallelModel*>(mine.get());
  if (!tpm) throw std::logic_error("the " + mc.family + " model is not a TensorParallelModel");
  int64_t numel = 0;
  for (const auto& p : full->parameters()) numel += p.numel();
  CS_CHECK(tpm->full_numel() == numel);
  const Batch b = family(mc.family).data(mc, cpu, 0, 1)->next();
  const Batch bm = family(mc.family).data(part, cpu, data ? data->rank() : 0, dp)->next();
  for (int step = 0; step < 3; step++) {
    torch::Tensor losses[2];
    int k = 0;
    for (auto* m : {full.get(), mine.get()}) {
      for (auto& p : m->parameters()) p.mutable_grad() = torch::Tensor();
      auto l = m->forward_loss(m == full.get() ? b : bm);
      l.backward();
      torch::NoGradGuard ng;
      auto lv = l.detach().clone().reshape({1});
      if (m == mine.get()) {
        tp::allreduce_sequence_parallel_grads(tpm->sequence_parallel_params(), c);
        if (data) {
          for (auto& p : m->parameters()) {
            data->all_reduce_sum(p.mutable_grad());
            p.mutable_grad().div_(dp);
          }
          data->all_reduce_sum(lv);
          lv.div_(dp);
        }
      }
      for (auto& p : m->parameters()) p.sub_(p.grad(), 0.5);
      losses[k++] = lv;
    }
    if (!close(("engine " + mc.family + " loss of step " + std::to_string(step)).c_str(), r,
               losses[1], losses[0], 1e-5))
      return 1;
  }
  auto got = tpm->gathered_parameters();
  auto want = full->parameters();
  CS_CHECK(got.size() == want.size());
  for (size_t i = 0; i < want.size(); i++)
    if (!close(("engine " + mc.family + " parameter " + std::to_string(i)).c_str(), r, got[i],
               want[i].detach(), 1e-5))
      return 1;
  return 0;
}

ModelConfig tiny_gpt(int64_t hidden) {
  ModelConfig mc;
  mc.family = "gpt";
  mc.preset = "tiny";
  mc.micro_batch = 2;
  mc.seq_len = 12;
  mc.hidden = hidden;
  mc.seed = 3;
  return mc;
}

// hidden 48 has 3 heads: at tp 3 the vocabulary of 256 is padded to 258.
int engine_gpt_case(const tp::Context& c, int r, int64_t hidden) {
  return engine_case(c, r, tiny_gpt(hidden));
}

// BERT (bert.cpp): tiny (2 heads, vocabulary 1024) at tp 2; base cut to one
// layer of hidden 48 (12 heads of 4) at tp 4, where its vocabulary of 30,522
// is padded to 30,524. 16 tokens: 2 masked positions per sequence.
ModelConfig small_bert(const std::string& preset) {
  ModelConfig mc;
  mc.family = "bert";
  mc.preset = preset;
  mc.micro_batch = 2;
  mc.seq_len = 16;
  mc.seed = 5;
  if (preset == "base") mc.layers = 1, mc.hidden = 48;
  return mc;
}

// Also the parameters the model shards: the sum of its shards over the
// group, less the vocabulary padding, is the count the planner's memory
// estimate splits (study.TensorShardedParams: per layer 4 H^2 + 2 H I + 3 H +
// I, the word embedding V H and the decoder bias V).
int engine_bert_case(const tp::Context& c, int r, const std::string& preset, PipeGroup* data = nullptr) {
  const ModelConfig mc = small_bert(preset);
  {
    auto m = make_bert_tp(mc, torch::Device(torch::kCPU), c);
    auto* tpm = dynamic_cast<TensorParallelModel*>(m.get());
    const auto sh = family("bert").describe(mc).shapes;
    const int64_t L = sh.at("layers"), H = sh.at("hidden"), I = sh.at("intermediate"),
                  V = sh.at("vocab"), n = c.size(), pad = (n - V % n) % n;
    int64_t sharded = 0;
    for (const auto& p : m->parameters())
      if (tpm->tensor_sharded(p)) sharded += p.numel() * n;
    const int64_t want = L * (4 * H * H + 2 * H * I + 3 * H + I) + V * H + V;
    if (sharded - pad * (H + 1) != want) {
      std::cerr << "FAIL tp engine bert (rank " << r << "): " << sharded - pad * (H + 1)
                << " sharded parameters, the planner counts " << want << "\n";
      return 1;
    }
  }
  return engine_case(c, r, mc, data);
}

int engine_gpt(const tp::Context& c, int r) { return engine_gpt_case(c, r, 0); }
int engine_gpt_padded(const tp::Context& c, int r) { return engine_gpt_case(c, r, 48); }
int engine_bert(const tp::Context& c, int r) { return engine_bert_case(c, r, "tiny"); }
int engine_bert_padded(const tp::Context& c, int r) { return engine_bert_case(c, r, "base"); }

// The tiny GPT on a tp × dp mesh (tp::Mesh: tensor groups of consecutive
// ranks, data groups across them), each group its own Gloo process group
// (make_gloo_pipe_groups of the mesh's partitions, as tp::make_mesh_groups).
using MeshBody = std::function<int(const tp::Context&, PipeGroup*, int)>;
int on_mesh(int tpn, int dpn, bool sp, const MeshBody& body = check_model,
            const std::string& name = "tiny gpt") {
  const auto m = tp::Mesh::of(tpn * dpn, tpn, 1);
  const auto parts = m.partitions();
  begin_case(name + " tp " + std::to_string(tpn) + " x dp " + std::to_string(dpn) +
             (sp ? " sequence parallel" : ""));
  World world(m.world());
  std::atomic<int> failed{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < m.world(); r++) {
    ranks.emplace_back([&, r] {
      tl_rank = r;
      use_alt_stack();
      int rc = 1;
      try {
        auto groups = make_gloo_pipe_groups(world.rank(r), parts);  // tensor, data, pipeline
        tp::Context c;
        c.group = groups[0].get();
        c.sequence_parallel = sp;
        if (c.rank() != m.coords(r).tensor || groups[1]->rank() != m.coords(r).data)
          throw std::logic_error("the mesh's coordinates disagree with its groups");
        rc = body(c, groups[1].get(), r);
      } catch (const std::exception& e) {
        std::cerr << "FAIL tp mesh (rank " << r << "): " << e.what() << "\n";
      }
      if (rc) failed++;
    });
  }
  for (auto& t : ranks) t.join();
  if (failed)
    std::cerr << "  case " << name << " tp " << tpn << " x dp " << dpn
              << (sp ? " sequence parallel" : "") << "\n";
  return failed ? 1 : 0;
}
#endif  // CS_WITH_GLOO

int mesh() {
  // 8 ranks, tp 2, pp 2 (so dp 2): tensor fastest, then data, then pipeline.
  auto m = tp::Mesh::of(8, 2, 2);
  CS_CHECK(m.dp == 2);
  auto p = m.partitions();
  CS_CHECK((p[0] == Partition{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  CS_CHECK((p[1] == Partition{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  CS_CHECK((p[2] == Partition{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  for (int r = 0; r < 8; r++) CS_CHECK(m.rank(m.coords(r)) == r);
  auto c = m.coords(6);
  CS_CHECK(c.tensor == 0 && c.data == 1 && c.pipe == 1);
  bool threw = false;
  try {
    tp::Mesh::of(6, 4, 1);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  CS_CHECK(threw);
  // Seeds: the replicated one equal on every tensor rank, the parallel ones distinct.
  CS_CHECK(tp::seeds(7, 0).replicated == tp::seeds(7, 3).replicated);
  CS_CHECK(tp::seeds(7, 0).parallel != tp::seeds(7, 1).parallel);
  CS_CHECK(tp::seeds(7, 1).parallel != tp::seeds(7, 1).replicated);
  return 0;
}

}  // namespace

int tp_tests() {
  install_fatal_handlers();
  Watchdog watchdog;
  begin_case("mesh");
  int failed = run_case("tp", "mesh", [] { return mesh(); });
#ifdef CS_WITH_GLOO
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const std::vector<std::pair<std::string, std::function<int(const tp::Context&, int)>>> cases = {
      {"column", column},       {"row", row},
      {"attention heads", heads}, {"vocab embedding", embedding},
      {"vocab cross-entropy", cross_entropy}, {"conjugates", conjugates},
      {"tiny gpt 3 steps", model}};
  int ran = 0;
  // CS_TP_CASE=NAME (one of cases' names) [CS_TP_REPEAT=N]: only that case,
  // at tp 2 and 4, sequence parallel off and on, N rounds (default 1): to
  // hunt a crash that shows once in many runs (docs/tensor-parallel.md).
  if (const char* only = std::getenv("CS_TP_CASE"); only != nullptr && *only != '\0') {
    const char* rep = std::getenv("CS_TP_REPEAT");
    const int rounds = rep ? std::max(1, std::atoi(rep)) : 1;
    bool known = false;
    if (std::string(only) == "concurrent groups") {  // issue 39's race, 8 fresh groups a round
      known = true;
      for (int i = 0; i < rounds; i++) failed |= concurrent_groups(4, 8, 3), ran++;
    }
    for (const auto& kv : cases) {
      if (kv.first != only) continue;
      known = true;
      for (int i = 0; i < rounds; i++)
        for (int n : {2, 4})
          for (bool sp : {false, true}) failed |= on_ranks(kv.first, n, sp, kv.second), ran++;
    }
    case_started_ms = 0;
    at::set_num_threads(threads);
    if (!known) {
      std::cerr << "FAIL tp: CS_TP_CASE=\"" << only << "\" names no case\n";
      return 1;
    }
    std::cout << "tp: " << ran << " runs of case \"" << only << "\" (" << rounds << " rounds)" << std::endl;
    return failed;
  }
  // The groups' collectives, at 2, 3 and 4 ranks.
  const std::vector<std::pair<std::string, std::function<int(const tp::Context&, int)>>> group_cases = {
      {"all-gather and reduce-scatter", collectives}, {"coalesced reductions", coalesced},
      {"timed group", timed}, {"group communicator", group_comm}};
  for (int n : {2, 3, 4})
    for (const auto& kv : group_cases) failed |= on_ranks(kv.first, n, false, kv.second), ran++;
  failed |= concurrent_groups(4, 8, 3), ran++;
  for (int n : {2, 4})
    for (bool sp : {false, true})
      for (const auto& kv : cases) failed |= on_ranks(kv.first, n, sp, kv.second), ran++;
  for (bool sp : {false, true}) failed |= on_mesh(2, 2, sp), ran++;
  // The engine's GPT: tp 2 and 4, sequence parallel off and on; tp 3 with the
  // vocabulary padded.
  for (int n : {2, 4})
    for (bool sp : {false, true}) failed |= on_ranks("engine gpt", n, sp, engine_gpt), ran++;
  failed |= on_ranks("engine gpt padded vocabulary", 3, false, engine_gpt_padded), ran++;
  // The engine's BERT: tiny at tp 2 and tp 2 x dp 2, base (one layer, hidden
  // 48) at tp 4 with the vocabulary padded; sequence parallel off and on.
  for (bool sp : {false, true}) {
    failed |= on_ranks("engine bert", 2, sp, engine_bert), ran++;
    failed |= on_ranks("engine bert padded vocabulary", 4, sp, engine_bert_padded), ran++;
  }
  failed |= on_mesh(2, 2, true,
                    [](const tp::Context& c, PipeGroup* data, int r) {
                      return engine_bert_case(c, r, "tiny", data);
                    },
                    "engine bert"),
      ran++;
  case_started_ms = 0;
  std::cout << "tp: " << ran
            << " cases on the engine's Gloo groups over thread ranks (tp 2, 3 and 4, tp 2 x dp 2, "
               "sequence parallel off and on, the engine's GPT and BERT, the groups' collectives and their timing)"
            << std::endl;
  at::set_num_threads(threads);
#else
  case_started_ms = 0;
  // On stdout too: a build without Gloo must not pass as if the layers were tested.
  std::cout << "tp: no Gloo in this build (CS_WITH_GLOO unset): only the mesh case ran; the "
               "multi-rank layer and model tests did not run"
            << std::endl;
#endif
  return failed;
}
