// profile_spans_test.cpp: cs_profile's interval arithmetic (profile_spans.h) on
// exact inputs: self times of nested CPU operators, the busy time (union over
// lanes) and each kernel's overlap with other lanes (a collective under compute).
// Run by tests/main.cpp (make engine-tests).
#include <cmath>
#include <iostream>
#include <vector>

#include "native_test.h"
#include "profile_spans.h"

using cs::Span;

namespace {

Span span(uint64_t start, uint64_t end, int64_t lane, size_t kernel) {
  Span s;
  s.start = start;
  s.end = end;
  s.lane = lane;
  s.kernel = kernel;
  s.self = end - start;
  return s;
}

bool near(double a, double b) { return std::abs(a - b) < 1e-9; }

}  // namespace

int profile_spans_tests() {
  {  // A compute kernel on stream 0, a collective on stream 1 half under it.
    std::vector<Span> s{span(0, 10, 0, 0), span(5, 15, 1, 1)};
    std::vector<double> ov(2, 0.0);
    CS_CHECK(near(cs::sweep_spans(s, ov), 15));
    CS_CHECK(near(ov[0], 5) && near(ov[1], 5));
  }
  {  // Kernels one after another on one stream, touching: no overlap, no gap.
    std::vector<Span> s{span(0, 5, 0, 0), span(5, 10, 0, 1), span(12, 14, 0, 0)};
    std::vector<double> ov(2, 0.0);
    CS_CHECK(near(cs::sweep_spans(s, ov), 12));
    CS_CHECK(near(ov[0], 0) && near(ov[1], 0));
  }
  {  // Two streams touching end to start do not overlap; a zero-length span counts nothing.
    std::vector<Span> s{span(0, 5, 0, 0), span(5, 9, 1, 1), span(7, 7, 2, 0)};
    std::vector<double> ov(2, 0.0);
    CS_CHECK(near(cs::sweep_spans(s, ov), 9));
    CS_CHECK(near(ov[0], 0) && near(ov[1], 0));
  }
  {  // Three streams: the collective [2, 12) is under compute on stream 0 for
     // [2, 6) and on stream 2 for [8, 10): 6 of its 10 ns.
    std::vector<Span> s{span(0, 6, 0, 0), span(2, 12, 1, 1), span(8, 10, 2, 0)};
    std::vector<double> ov(2, 0.0);
    CS_CHECK(near(cs::sweep_spans(s, ov), 12));
    CS_CHECK(near(ov[1], 6));
    CS_CHECK(near(ov[0], 4 + 2));
  }
  {  // CPU operators nest on a thread: aten::linear [0, 10) holds aten::addmm
     // [1, 7), which holds a copy [2, 3); then aten::gelu [10, 12).
    std::vector<Span> s{span(0, 10, 7, 0), span(1, 7, 7, 1), span(2, 3, 7, 2), span(10, 12, 7, 3)};
    cs::nest_spans(s);
    CS_CHECK(s[0].self == 4 && s[1].self == 5 && s[2].self == 1 && s[3].self == 2);
    std::vector<double> ov(4, 0.0);
    CS_CHECK(near(cs::sweep_spans(s, ov), 12));  // one lane: the busy time is the outer spans
    CS_CHECK(near(ov[0] + ov[1] + ov[2] + ov[3], 0));
  }
  {  // Nesting is per thread: a collective on another thread [4, 8) overlaps
     // the operator [0, 10) whose self time is half of it: 2 of its 4 ns.
    std::vector<Span> s{span(0, 10, 1, 0), span(0, 5, 1, 1), span(4, 8, 2, 2)};
    cs::nest_spans(s);
    CS_CHECK(s[0].self == 5 && s[1].self == 5 && s[2].self == 4);
    std::vector<double> ov(3, 0.0);
    CS_CHECK(near(cs::sweep_spans(s, ov), 10));
    CS_CHECK(near(ov[2], 4));
    CS_CHECK(near(ov[0], 4 * 0.5) && near(ov[1], 1));
  }
  std::cout << "profile spans ok\n";
  return 0;
}
