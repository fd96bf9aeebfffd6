// timed_group.cpp: the timed PipeGroup (timed_group.h).
#include "timed_group.h"

#include <utility>

namespace cs {

TimedGroup::TimedGroup(std::unique_ptr<PipeGroup> inner, torch::Device device)
    : inner_(std::move(inner)), device_(device) {}

void TimedGroup::begin_step() {
  open_ = true;
  marks_ = 0;
  collectives_ = 0;
  bytes_ = 0;
}

void TimedGroup::end_step() { open_ = false; }

int TimedGroup::next_mark() {
  if (marks_ == int(chunks_.size()) * kChunk) chunks_.push_back(make_timeline(device_, kChunk));
  const int m = marks_++;
  chunks_[size_t(m / kChunk)]->mark(m % kChunk);
  return m;
}

template <class F>
void TimedGroup::timed(int64_t bytes, F&& call) {
  if (!open_) {
    call();
    return;
  }
  next_mark();
  try {
    call();
  } catch (...) {
    marks_--;  // the pairs stay aligned
    throw;
  }
  next_mark();
  collectives_++;
  bytes_ += bytes;
}

GroupCommStats TimedGroup::stats() {
  GroupCommStats s;
  s.collectives = collectives_;
  s.bytes = bytes_;
  if (marks_ == 0) return s;
  const int last = marks_ - 1;
  chunks_[size_t(last / kChunk)]->finish(last % kChunk);
  for (int a = 0; a + 1 < marks_; a += 2) {
    s.each_ms.push_back(chunks_[size_t(a / kChunk)]->ms(a % kChunk, a % kChunk + 1));
    s.ms += s.each_ms.back();
  }
  return s;
}

void TimedGroup::exchange(const std::vector<P2POp>& ops) {
  int64_t bytes = 0;
  for (const auto& op : ops) bytes += int64_t(op.t.nbytes());
  timed(bytes, [&] { inner_->exchange(ops); });
}

void TimedGroup::all_reduce_sum(torch::Tensor t) {
  timed(int64_t(t.nbytes()), [&] { inner_->all_reduce_sum(t); });
}

void TimedGroup::all_gather(const torch::Tensor& in, torch::Tensor out) {
  timed(int64_t(out.nbytes()), [&] { inner_->all_gather(in, out); });
}

void TimedGroup::reduce_scatter_sum(const torch::Tensor& in, torch::Tensor out) {
  timed(int64_t(in.nbytes()), [&] { inner_->reduce_scatter_sum(in, out); });
}

TimedGroup* time_group(std::unique_ptr<PipeGroup>& g, torch::Device device) {
  if (!g) return nullptr;
  auto t = std::make_unique<TimedGroup>(std::move(g), device);
  TimedGroup* out = t.get();
  g = std::move(t);
  return out;
}

}  // namespace cs
