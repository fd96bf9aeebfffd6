// nccl_util.h: communicator set-up shared by comm_nccl.cpp and
// pipeline_group_nccl.cpp (built only with CS_WITH_NCCL).
//
// From NCCL 2.14 every communicator is non-blocking (ncclConfig_t.blocking =
// 0): ncclCommInitRankConfig returns at once and the rank polls
// ncclCommGetAsyncError under the collective deadline (comm_watch.h), so a
// peer that never arrives costs dist.timeout_ms, not the trial's timeout, and
// the communicator is aborted. A call on a non-blocking communicator may
// answer ncclInProgress; settle() polls until it is done, and no NCCL call is
// made on the communicator before that. Older NCCL initialises blocking.
#pragma once

#include <nccl.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "comm_watch.h"
#include "dist.h"

namespace cs {

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define CS_NCCL_NONBLOCKING 1
#else
#define CS_NCCL_NONBLOCKING 0
#endif

// ncclCommSplit came with NCCL 2.18.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
#define CS_NCCL_SPLIT 1
#else
#define CS_NCCL_SPLIT 0
#endif

// Communicators split from the world's (the groups of pipeline_group_nccl.cpp;
// implemented in comm_nccl.cpp, which owns the world's ncclComm_t).
// nccl_split_unavailable: "" when nccl_split can run: this build's NCCL
// headers and the library loaded at run time (ncclGetVersion) are 2.18 or
// newer and world is make_nccl_communicator's; else why not, for the log of
// the fallback (a communicator per group from a unique id).
std::string nccl_split_unavailable(Communicator& world);
// ncclCommSplit of world: every rank of world calls it, in the same order,
// with its color (ranks of one color form a communicator; NCCL_SPLIT_NOCOLOR:
// none, nullptr back) and key (the rank order inside it). The world's
// outstanding collectives finish first and no launch runs beside the split;
// the new communicator is non-blocking like the world's (config.blocking 0,
// splitShare left off: it shares no resources with the world, which may be
// destroyed in either order; the groups are destroyed first), its init polled
// under the collective deadline. A split past the deadline aborts the world
// communicator (a peer never came) and throws CommError, as does a failure.
ncclComm_t nccl_split(Communicator& world, int color, int key, const std::string& what);

inline std::string nccl_error_text(ncclResult_t r) {
  std::string s = ncclGetErrorString(r);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') s += ": " + std::string(last);
#endif
  return s;
}

// Polls a non-blocking communicator until the call that answered r is done;
// returns its final result. query(&r) runs ncclCommGetAsyncError on the
// communicator (the caller may lock around it); aborted() says the
// communicator was aborted meanwhile (then the result is ncclInternalError).
// Past the collective deadline it answers ncclInProgress still: the caller
// aborts.
inline ncclResult_t nccl_settle(ncclResult_t r, const std::function<ncclResult_t(ncclResult_t*)>& query,
                                const std::function<bool()>& aborted = [] { return false; }) {
#if CS_NCCL_NONBLOCKING
  const auto start = std::chrono::steady_clock::now();
  while (r == ncclInProgress) {
    if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(commwatch::deadline_ms()))
      return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (aborted()) return ncclInternalError;
    ncclResult_t q = ncclSuccess;
    const ncclResult_t qr = query(&q);
    if (qr != ncclSuccess) return qr;
    r = q;
  }
#else
  (void)query;
  (void)aborted;
#endif
  return r;
}

// ncclCommInitRank, non-blocking where NCCL can, under the collective
// deadline. what names the communicator in errors ("nccl", "nccl pipeline").
inline ncclComm_t nccl_init_rank(int nranks, const ncclUniqueId& id, int rank, const std::string& what) {
  ncclComm_t comm = nullptr;
  const std::string who = what + ": ncclCommInitRank (rank " + std::to_string(rank) + " of " +
                          std::to_string(nranks) + ")";
#if CS_NCCL_NONBLOCKING
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, id, rank, &config);
  if (r == ncclInProgress) {
    r = nccl_settle(r, [&](ncclResult_t* q) { return ncclCommGetAsyncError(comm, q); });
    if (r == ncclInProgress) {
      ncclCommAbort(comm);
      const std::string msg = who + ": not done after dist.timeout_ms=" +
                              std::to_string(commwatch::deadline_ms()) +
                              " (a peer never joined?); communicator aborted";
      commwatch::failed(msg);
      throw CommError(msg);
    }
  }
  if (r != ncclSuccess) {
    if (comm != nullptr) ncclCommAbort(comm);
    const std::string msg = who + ": " + nccl_error_text(r);
    commwatch::failed(msg);
    throw CommError(msg);
  }
#else
  ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  if (r != ncclSuccess) throw CommError(who + ": " + nccl_error_text(r));
#endif
  return comm;
}

// The orderly end of a communicator: ncclCommFinalize (polled, under the
// deadline, on a non-blocking communicator), then ncclCommDestroy. A finalize
// past the deadline aborts the communicator instead and answers
// ncclInProgress.
inline ncclResult_t nccl_destroy(ncclComm_t comm) {
#if CS_NCCL_NONBLOCKING
  ncclResult_t r = nccl_settle(ncclCommFinalize(comm), [&](ncclResult_t* q) { return ncclCommGetAsyncError(comm, q); });
  if (r == ncclInProgress) {
    ncclCommAbort(comm);
    return r;
  }
  if (r != ncclSuccess) {
    ncclCommAbort(comm);
    return r;
  }
#endif
  return ncclCommDestroy(comm);
}

}  // namespace cs
