// gloo_store.h: the key-value store Gloo meshes a trial's ranks through.
#pragma once
#ifdef CS_WITH_GLOO

#include <torch/csrc/distributed/c10d/Store.hpp>

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

}  // namespace cs

#endif  // CS_WITH_GLOO
