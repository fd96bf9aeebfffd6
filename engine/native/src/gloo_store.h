// gloo_store.h: the key-value store Gloo meshes a trial's ranks through.
#pragma once
#ifdef CS_WITH_GLOO

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <mutex>

#include "dist.h"

namespace cs {

// The store of o's trial. With dist.store_token (every run of `casestudy
// run`) it is the runner's rendezvous at store_addr:store_port, which admits
// only the trial's ranks (the token) and listens only where the rendezvous
// does; each call opens its own authenticated connection. Without a token
// (engine tests and tools that start ranks themselves) it is a c10d TCPStore
// that rank 0 serves when serve is set: that one listens on every interface
// and checks nothing, so it is for trusted machines only.
c10::intrusive_ptr<c10d::Store> make_gloo_store(const DistOptions& o, bool serve);

// One lock for the whole process, held while a c10d Gloo collective is ISSUED
// (pg->allreduce(...), ->allgather, ->broadcast, ->send, ->recv, ->barrier),
// never while it is waited on: gloo_issue([&] { return pg->allreduce(v); })->wait().
// Why (issue 39): torch 2.x's ProcessGroupGloo::enqueue records every
// collective in the process-global FlightRecorder<c10::Event> (on by default:
// TORCH_FR_BUFFER_SIZE, 2000 entries) under only its own group's workMutex_,
// and in the torch releases around 2.10/2.11
// FlightRecorder::recordWithResetEnabled looks up and inserts the group into
// its std::map all_pg_status_ BEFORE it takes its own mutex_ (a later pytorch
// takes the lock first). Several ProcessGroupGloo objects issuing
// from several threads of one process (the tp suite's thread ranks,
// shadow_gloo.cpp's helper ranks, ZeRO's gathers on the comm thread beside the
// tensor group's collectives on the rank's thread) then race on that map: the
// H100 host's torch 2.11 tp suite died in _Rb_tree_insert_and_rebalance under
// ProcessGroupGloo::enqueue under ProcessGroupGloo::allreduce (2026-12-07,
// main 6318563); libtorch 1.13 (no flight recorder) never did. Issuing is
// non-blocking (it queues the work), so the lock costs microseconds.
std::mutex& gloo_issue_mutex();

template <class Issue>
auto gloo_issue(Issue&& issue) -> decltype(issue()) {
  std::lock_guard<std::mutex> lock(gloo_issue_mutex());
  return issue();
}

}  // namespace cs

#endif  // CS_WITH_GLOO
