// gloo_group.h: the engine's one door to c10d's ProcessGroupGloo. Every Gloo
// collective of the engine (comm_gloo.cpp's communicator, the pipeline's and
// tensor parallelism's groups in pipeline_group_gloo.cpp, the stretch
// calibration's group in shadow_group.cpp) goes through a GlooGroup, which
// takes the process-wide issue lock below on every call. No other file may
// include ProcessGroupGloo.hpp or name a c10d process group:
// scripts/lint-gloo.sh (make lint) fails the build if one does.
//
// The lock (issue 39): torch 2.x's ProcessGroupGloo::enqueue records every
// collective in the process-global FlightRecorder<c10::Event> (on by default:
// TORCH_FR_BUFFER_SIZE, 2000 entries) under only its own group's workMutex_,
// and in the torch releases around 2.10/2.11
// FlightRecorder::recordWithResetEnabled looks up and inserts the group into
// its std::map all_pg_status_ BEFORE it takes its own mutex_ (a later pytorch
// takes the lock first). Several ProcessGroupGloo objects issuing from several
// threads of one process (the tp suite's thread ranks, the stretch
// calibration's helper ranks, ZeRO's gathers on the comm thread beside the
// tensor group's collectives on the rank's thread) then race on that map: the
// H100 host's torch 2.11 tp suite died in _Rb_tree_insert_and_rebalance under
// ProcessGroupGloo::enqueue under ProcessGroupGloo::allreduce (2026-12-07,
// main 6318563); libtorch 1.13 (no flight recorder) never did. The lock is
// held while a collective is ISSUED (queued: microseconds), never while it is
// waited on, so groups still run their collectives concurrently.
#pragma once
#ifdef CS_WITH_GLOO

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cs {

class GlooGroup;

// An issued collective.
class GlooWork {
 public:
  GlooWork(GlooWork&&) noexcept;
  GlooWork& operator=(GlooWork&&) noexcept;
  ~GlooWork();
  // Blocks until the collective is done; throws what Gloo throws (its own
  // timeout included). timeout 0: no limit beyond the group's.
  void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

 private:
  friend class GlooGroup;
  struct Impl;
  explicit GlooWork(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// How a group's ranks reach each other.
enum class GlooNet {
  // A trial's ranks: GLOO_SOCKET_IFNAME's interface if set, else the store's
  // address when it is a loopback one, else the machine's hostname.
  Trial,
  // Ranks of this process only (shadow_group.h): 127.0.0.1, whatever the
  // environment says.
  Loopback,
};

// One c10d Gloo process group of size ranks (this one rank), meshed through
// store, with one Gloo thread (the caller serialises its collectives). The
// collectives issue under the process-wide lock and return at once; wait()
// on the work takes no lock.
class GlooGroup {
 public:
  GlooGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
            GlooNet net, const std::string& store_addr = "");
  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // t (contiguous, a dtype Gloo sums: not bfloat16) summed over the group in place.
  GlooWork allreduce(const at::Tensor& t);
  // in from every rank into outs[r] (size() tensors of in's shape and dtype).
  GlooWork allgather(const std::vector<at::Tensor>& outs, const at::Tensor& in);
  // t (contiguous) from root to every rank.
  GlooWork broadcast(const at::Tensor& t, int root);
  GlooWork send(const at::Tensor& t, int peer, int tag);
  GlooWork recv(const at::Tensor& t, int peer, int tag);
  GlooWork barrier();

 private:
  struct Impl;
  int rank_, size_;
  std::unique_ptr<Impl> impl_;
};

// The dtype a tensor travels as on Gloo, which has no bfloat16: fp32.
torch::ScalarType gloo_wire_type(const torch::Tensor& t);

// Runs op on a tensor Gloo accepts and copies the result back into t: t
// itself when it is contiguous and not bf16, else a contiguous copy in
// gloo_wire_type (bf16 as fp32, a channels_last weight as a contiguous one).
void on_wire(const torch::Tensor& t, const std::function<void(const torch::Tensor&)>& op);

}  // namespace cs

#endif  // CS_WITH_GLOO
