// host_queue.cpp: see host_queue.h.
#include "host_queue.h"

#include <ATen/ThreadLocalState.h>

#include <algorithm>

#include "comm_watch.h"

namespace cs {

struct HostQueue::State {
  std::string name;
  int deadline_ms;
  std::mutex mu;
  std::condition_variable cv;
  struct Task {
    std::function<void()> fn;
    std::shared_ptr<HostWork> work;
    // The submitting thread's thread-local state (grad mode, the profiler's
    // callbacks, ...), as at::launch carries it: with cs_profile on, the
    // collectives run here are recorded like the ones issued in place.
    at::ThreadLocalState tls;
  };
  std::deque<Task> tasks;
  bool stop = false;
  bool busy = false;
  std::string failed;  // first error: later collectives fail at once
};

// The host deadline follows the live collective deadline (cs_set_comm_timeout
// may lower it after the warm-up, below the backend's own timeout, which was
// fixed when the backend was set up) with a second's slack.
constexpr int kLiveSlackMS = 1000;

void HostWork::wait() {
  std::unique_lock<std::mutex> lk(mu_);
  const int deadline = std::min(deadline_ms_, commwatch::deadline_ms() + kLiveSlackMS);
  if (!cv_.wait_for(lk, std::chrono::milliseconds(deadline), [this] { return done_; })) {
    const std::string what = "collective not finished after " + std::to_string(deadline) +
                             " ms (host deadline; dist.timeout_ms=" +
                             std::to_string(commwatch::deadline_ms()) + ")";
    commwatch::failed(what);
    throw CommError(what);
  }
  if (!error_.empty()) throw CommError(error_);
}

HostQueue::HostQueue(std::string name, int deadline_ms) : state_(std::make_shared<State>()) {
  state_->name = std::move(name);
  state_->deadline_ms = deadline_ms;
  std::shared_ptr<State> st = state_;
  thread_ = std::thread([st] {
    for (;;) {
      std::unique_lock<std::mutex> lk(st->mu);
      st->cv.wait(lk, [&] { return st->stop || !st->tasks.empty(); });
      if (st->tasks.empty()) return;  // stop requested and nothing left
      auto task = std::move(st->tasks.front());
      st->tasks.pop_front();
      std::string failed = st->failed;
      st->busy = true;
      lk.unlock();

      std::string error = failed.empty() ? "" : failed + " (an earlier collective failed)";
      auto t0 = std::chrono::steady_clock::now();
      if (error.empty()) {
        try {
          at::ThreadLocalStateGuard guard(task.tls);
          task.fn();
        } catch (const std::exception& e) {
          error = st->name + ": " + e.what();
        }
      }
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      // What the job captured (a collective's tensors) is released before
      // the work is done, not when the next job replaces it: a reduce-scatter's
      // input is gone once its collective is (dist.h).
      task.fn = nullptr;

      commwatch::completed();  // done, failed, or skipped after an earlier failure
      if (!error.empty() && failed.empty()) commwatch::failed(error);
      lk.lock();
      st->busy = false;
      if (!error.empty() && st->failed.empty()) st->failed = error;
      lk.unlock();
      HostWork& w = *task.work;
      {
        std::lock_guard<std::mutex> wl(w.mu_);
        w.done_ = true;
        w.error_ = error;
        w.ms_ = ms;
      }
      w.cv_.notify_all();
    }
  });
}

HostQueue::~HostQueue() {
  bool idle;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stop = true;
    idle = !state_->busy && state_->tasks.empty();
  }
  state_->cv.notify_all();
  // A collective stuck past every deadline must not hang the teardown: the
  // thread keeps its state alive and is left behind.
  if (idle) {
    thread_.join();
  } else {
    thread_.detach();
  }
}

std::shared_ptr<HostWork> HostQueue::submit(std::function<void()> fn) {
  auto w = std::make_shared<HostWork>(state_, state_->deadline_ms);
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (!state_->failed.empty()) throw CommError(state_->failed + " (an earlier collective failed)");
    commwatch::issued(state_->name.c_str());
    state_->tasks.push_back(State::Task{std::move(fn), w, at::ThreadLocalState()});
  }
  state_->cv.notify_one();
  return w;
}

}  // namespace cs
