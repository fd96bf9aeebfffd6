// comm_watch.h: what this rank's communication is doing, readable from any
// thread while a step runs (cs_comm_progress), the deadline every backend
// applies to a collective (dist.timeout_ms, updated by cs_set_comm_timeout),
// and the aborts of every communicator the rank holds (world, pipeline and
// stage groups) after a communication failure. Process-wide: a rank is one
// process. Every function is thread-safe and none blocks on a collective.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace cs {
namespace commwatch {

// A collective (all-reduce, all-gather, broadcast, barrier, a pipeline
// exchange) was handed to the backend; op names it.
void issued(const char* op);
// A collective issued earlier finished (successfully or not).
void completed();
// A synchronous collective's span: issued() on construction, completed() on
// destruction.
struct Span {
  explicit Span(const char* op) { issued(op); }
  ~Span() { completed(); }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
};
// The data-parallel reducer launched bucket b of the current step.
void bucket(int b);
// The trainer started step s.
void step(int64_t s);

// The per-collective deadline in milliseconds (dist.timeout_ms); > 0.
int deadline_ms();
// Sets it (cs_create from the config; cs_set_comm_timeout after the warm-up).
// Throws std::invalid_argument unless ms > 0.
void set_deadline_ms(int ms);

// Registers abort, called at most once by abort_all(); returns the id that
// forget() takes. A communicator registers when created and forgets when
// closed or destroyed.
int on_abort(std::function<void()> abort);
void forget(int id);
// Records the first communication failure (a collective past its deadline, a
// backend error); the trainer's teardown then aborts instead of waiting.
void failed(const std::string& what);
bool has_failed();
// Aborts every registered communicator once (no device synchronisation).
void abort_all();

// {"collectives_issued","collectives_completed","last_op","step","bucket",
//  "pending_ms","deadline_ms","failed","failure"} (docs/engine.md): pending_ms
// is how long the rank has waited with collectives outstanding since the last
// one completed (0 when none is outstanding).
nlohmann::json progress_json();

// Back to the state of a fresh process (a new engine in the same process:
// tests and tools that create several).
void reset();

}  // namespace commwatch
}  // namespace cs
