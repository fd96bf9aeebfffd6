// gloo_store.cpp: the runner's rendezvous as a c10d::Store (make_gloo_store).
// The protocol is the rendezvous's JSON lines (runner/rendezvous/store.go): a
// hello with the trial's token and role "store", then one request at a time,
// each answered at once; get and wait poll check until the keys are there or
// the store's timeout passes, so no request blocks the connection.
#ifdef CS_WITH_GLOO

#include "gloo_store.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "model.h"  // ConfigError

namespace cs {
namespace {

using json = nlohmann::json;

std::string to_hex(const std::vector<uint8_t>& v) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(v.size() * 2);
  for (uint8_t b : v) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

std::vector<uint8_t> from_hex(const std::string& s) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw CommError("rendezvous store: a reply holds non-hex data");
  };
  if (s.size() % 2) throw CommError("rendezvous store: a reply holds odd-length hex data");
  std::vector<uint8_t> v(s.size() / 2);
  for (size_t i = 0; i < v.size(); i++) v[i] = uint8_t(nibble(s[2 * i]) << 4 | nibble(s[2 * i + 1]));
  return v;
}

class RendezvousStore : public c10d::Store {
 public:
  RendezvousStore(std::string host, int port, std::string token, int rank,
                  std::chrono::milliseconds timeout)
      : Store(timeout), host_(std::move(host)), port_(port), token_(std::move(token)), rank_(rank) {
    connect();
  }
  ~RendezvousStore() override {
    if (fd_ >= 0) ::close(fd_);
  }

  // A copy on its own connection to the same store (torch 2.x declares it;
  // on 1.13 it is just a method).
  c10::intrusive_ptr<c10d::Store> clone() {
    return c10::make_intrusive<RendezvousStore>(host_, port_, token_, rank_, timeout_);
  }

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    call({{"op", "set"}, {"key", key}, {"data", to_hex(value)}});
  }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    json r = call({{"op", "compare_set"}, {"key", key}, {"data", to_hex(expected)}, {"desired", to_hex(desired)}});
    return from_hex(r.value("data", ""));
  }
  std::vector<uint8_t> get(const std::string& key) override {
    wait({key}, timeout_);
    json r = call({{"op", "get"}, {"key", key}});
    return from_hex(r.value("data", ""));
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return call({{"op", "add"}, {"key", key}, {"delta", delta}}).value("count", int64_t(0));
  }
  bool deleteKey(const std::string& key) override {
    return call({{"op", "delete"}, {"key", key}}).value("found", false);
  }
  bool check(const std::vector<std::string>& keys) override {
    return call({{"op", "check"}, {"keys", keys}}).value("found", false);
  }
  int64_t getNumKeys() override { return call({{"op", "num_keys"}}).value("count", int64_t(0)); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::milliseconds(1);
    while (!check(keys)) {
      if (timeout != kNoTimeout && std::chrono::steady_clock::now() >= deadline)
        throw CommError("rendezvous store: keys not set within " + std::to_string(timeout.count()) +
                        " ms (first: " + (keys.empty() ? std::string() : keys[0]) + ")");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }

 private:
  void connect() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string port = std::to_string(port_);
    if (int e = ::getaddrinfo(host_.c_str(), port.c_str(), &hints, &res); e != 0)
      throw CommError("rendezvous store " + where() + ": " + gai_strerror(e));
    for (addrinfo* a = res; a != nullptr && fd_ < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        ::close(fd);
      }
    }
    ::freeaddrinfo(res);
    if (fd_ < 0) throw CommError("rendezvous store " + where() + ": cannot connect: " + std::strerror(errno));
    timeval tv{60, 0};  // every request is answered at once; silence means the runner is gone
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    json r = request({{"type", "hello"}, {"token", token_}, {"rank", rank_}, {"role", "store"}});
    if (r.value("type", "") != "ok")
      throw CommError("rendezvous store " + where() + " refused rank " + std::to_string(rank_) + ": " +
                      r.value("message", std::string("no reason given")));
  }

  json call(json req) {
    req["type"] = "store";
    json r = request(std::move(req));
    if (r.value("type", "") != "value")
      throw CommError("rendezvous store " + where() + ": " + r.value("message", std::string("unexpected reply")));
    return r;
  }

  // One request and its reply; requests are serialised on the connection.
  json request(json req) {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ < 0) throw CommError("rendezvous store " + where() + ": the connection broke earlier");
    req["id"] = ++next_id_;
    const std::string line = req.dump() + "\n";
    for (size_t off = 0; off < line.size();) {
      ssize_t n = ::send(fd_, line.data() + off, line.size() - off, MSG_NOSIGNAL);
      if (n <= 0) broken("send");
      off += size_t(n);
    }
    for (;;) {
      if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
        json r = json::parse(buf_.substr(0, nl), nullptr, /*allow_exceptions=*/false);
        buf_.erase(0, nl + 1);
        if (r.is_discarded()) broken("a reply that is not JSON");
        if (r.value("id", int64_t(0)) == next_id_) return r;
        continue;
      }
      char chunk[4096];
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) broken("receive");
      buf_.append(chunk, size_t(n));
    }
  }

  [[noreturn]] void broken(const char* what) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    throw CommError("rendezvous store " + where() + ": " + what + " failed: " + why);
  }

  std::string where() const { return host_ + ":" + std::to_string(port_); }

  std::string host_;
  int port_;
  std::string token_;
  int rank_;
  std::mutex mu_;
  int fd_ = -1;
  int64_t next_id_ = 0;
  std::string buf_;
};

}  // namespace

c10::intrusive_ptr<c10d::Store> make_gloo_store(const DistOptions& o, bool serve) {
  if (o.store_addr.empty() || o.store_port <= 0 || o.store_port > 65535) {
    throw ConfigError("dist: gloo needs store_addr and store_port (1-65535), got \"" + o.store_addr +
                      "\":" + std::to_string(o.store_port));
  }
  const auto timeout = std::chrono::milliseconds(o.timeout_ms);
  if (!o.store_token.empty())
    return c10::make_intrusive<RendezvousStore>(o.store_addr, o.store_port, o.store_token, o.rank, timeout);
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(o.store_port);
  so.isServer = serve && o.rank == 0;
  so.numWorkers = o.world_size;
  so.waitWorkers = false;  // ProcessGroupGloo's own rendezvous waits for everyone
  so.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(o.store_addr, so);
}

}  // namespace cs

#endif  // CS_WITH_GLOO
