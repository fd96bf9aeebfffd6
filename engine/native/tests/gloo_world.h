// gloo_world.h: a world of thread ranks for the multi-rank C++ tests
// (tp_test.cpp, tppp_test.cpp): a c10d TCPStore on a free loopback port, served
// as rank 0 of a trial serves it (make_gloo_store), and each rank's
// DistOptions for make_gloo_pipe_groups. Compiled only with CS_WITH_GLOO.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gloo_store.h"

namespace cs {
namespace test {

// A free TCP port on the loopback for a case's store.
inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("test world: socket: " + std::string(std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("test world: bind: " + std::string(std::strerror(errno)));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// One case's world of n thread ranks: the store rank 0 of a trial serves
// (make_gloo_store, as the engine's communicator does without a runner) and
// each rank's options for make_gloo_pipe_groups.
struct World {
  explicit World(int n) {
    base.world_size = n;
    base.store_addr = "127.0.0.1";
    base.store_port = free_port();
    base.timeout_ms = 60000;
    server = make_gloo_store(base, /*serve=*/true);
  }
  DistOptions rank(int r) const {
    DistOptions o = base;
    o.rank = r;
    return o;
  }
  DistOptions base;
  c10::intrusive_ptr<c10d::Store> server;
};

}  // namespace test
}  // namespace cs
