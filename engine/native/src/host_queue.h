// host_queue.h: the CPU ranks' "communication stream": one thread that runs
// blocking collectives in the order they were issued (every rank must issue
// collectives in the same order) and times each on the host clock.
#pragma once

#include "dist.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace cs {

class HostQueue;

// A collective queued on a HostQueue.
class HostWork : public CommWork {
 public:
  HostWork(std::shared_ptr<void> keep, int deadline_ms) : keep_(std::move(keep)), deadline_ms_(deadline_ms) {}
  void wait() override;
  double elapsed_ms() override {
    wait();
    return ms_;
  }

 private:
  friend class HostQueue;
  std::shared_ptr<void> keep_;  // the queue's state outlives every work
  int deadline_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
  double ms_ = 0;
};

class HostQueue {
 public:
  // name prefixes error messages ("gloo"); deadline_ms bounds a host wait()
  // (the backend's own timeout should fire first).
  HostQueue(std::string name, int deadline_ms);
  ~HostQueue();
  HostQueue(const HostQueue&) = delete;
  HostQueue& operator=(const HostQueue&) = delete;

  // Queues fn (a blocking collective); its exception becomes the work's
  // CommError. fn, and what it captured, is destroyed on the queue's thread
  // as soon as it has run, before the work is marked done.
  std::shared_ptr<HostWork> submit(std::function<void()> fn);
  // Queues fn and waits for it.
  void run(std::function<void()> fn) { submit(std::move(fn))->wait(); }

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace cs
