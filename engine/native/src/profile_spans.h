// profile_spans.h: the interval arithmetic of cs_profile (profile.cpp), apart
// from torch so that tests/profile_spans_test.cpp checks it on exact inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cs {

// One kernel (CPU operator) on a lane: a CUDA stream, or a CPU thread.
struct Span {
  uint64_t start = 0, end = 0;  // ns
  int64_t lane = 0;
  size_t kernel = 0;  // index of its name's totals
  uint64_t self = 0;  // ns not covered by spans nested in it on its lane
};

// Sets each span's self time: its length less the spans nested in it on its
// lane (CPU operators nest: aten::linear holds aten::addmm). Spans of one lane
// either nest or follow each other.
void nest_spans(std::vector<Span>& spans);

// Returns the busy time (ns during which at least one lane has a span) and adds
// to overlap_ns[kernel] each span's overlap: the time during which another lane
// was busy too, counted on the span's self time's share of its length.
// overlap_ns must have an entry for every kernel index.
double sweep_spans(const std::vector<Span>& spans, std::vector<double>& overlap_ns);

}  // namespace cs
