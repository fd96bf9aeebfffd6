// comm_watch.cpp: see comm_watch.h.
#include "comm_watch.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace cs {
namespace commwatch {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
  std::atomic<int64_t> issued{0}, completed{0}, step{-1};
  std::atomic<int> bucket{-1};
  std::atomic<int> deadline_ms{600000};
  std::atomic<bool> failed{false};
  // Time of the last completion (or of the issue that made the rank busy
  // again): how long the oldest pending collective has had no progress.
  std::atomic<int64_t> progress_ns{0};
  std::mutex mu;  // the fields below
  std::string last_op;
  std::string failure;
  std::map<int, std::function<void()>> aborts;
  int next_id = 1;
};

State& state() {
  static State s;
  return s;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

void issued(const char* op) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.last_op = op;
  }
  // Busy again after being idle: the wait starts now.
  if (s.issued.load() == s.completed.load()) s.progress_ns.store(now_ns());
  s.issued.fetch_add(1);
}

void completed() {
  State& s = state();
  s.completed.fetch_add(1);
  s.progress_ns.store(now_ns());
}

void bucket(int b) { state().bucket.store(b); }

void step(int64_t st) {
  state().step.store(st);
  state().bucket.store(-1);
}

int deadline_ms() { return state().deadline_ms.load(); }

void set_deadline_ms(int ms) {
  if (ms <= 0) throw std::invalid_argument("the collective deadline must be positive, got " + std::to_string(ms) + " ms");
  state().deadline_ms.store(ms);
}

int on_abort(std::function<void()> abort) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  const int id = s.next_id++;
  s.aborts[id] = std::move(abort);
  return id;
}

void forget(int id) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.aborts.erase(id);
}

void failed(const std::string& what) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  if (!s.failed.exchange(true)) s.failure = what;
}

bool has_failed() { return state().failed.load(); }

void abort_all() {
  State& s = state();
  std::vector<std::function<void()>> todo;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    for (auto& kv : s.aborts) todo.push_back(std::move(kv.second));
    s.aborts.clear();
  }
  for (auto& f : todo) {
    try {
      f();
    } catch (...) {
      // an abort reports nothing: the failure that led here is the error
    }
  }
}

nlohmann::json progress_json() {
  State& s = state();
  const int64_t issued_n = s.issued.load(), completed_n = s.completed.load();
  double pending_ms = 0;
  if (issued_n > completed_n) pending_ms = double(now_ns() - s.progress_ns.load()) / 1e6;
  std::lock_guard<std::mutex> lk(s.mu);
  return {{"collectives_issued", issued_n},
          {"collectives_completed", completed_n},
          {"last_op", s.last_op},
          {"step", s.step.load()},
          {"bucket", s.bucket.load()},
          {"pending_ms", pending_ms},
          {"deadline_ms", s.deadline_ms.load()},
          {"failed", s.failed.load()},
          {"failure", s.failure}};
}

void reset() {
  State& s = state();
  s.issued.store(0);
  s.completed.store(0);
  s.step.store(-1);
  s.bucket.store(-1);
  s.failed.store(false);
  s.progress_ns.store(0);
  std::lock_guard<std::mutex> lk(s.mu);
  s.last_op.clear();
  s.failure.clear();
}

}  // namespace commwatch
}  // namespace cs
