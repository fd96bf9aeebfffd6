// profile_spans.cpp: see profile_spans.h.
#include "profile_spans.h"

#include <algorithm>
#include <unordered_map>

namespace cs {

void nest_spans(std::vector<Span>& spans) {
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Span &x = spans[a], &y = spans[b];
    if (x.lane != y.lane) return x.lane < y.lane;
    if (x.start != y.start) return x.start < y.start;
    return x.end > y.end;  // the enclosing span first
  });
  std::vector<size_t> stack;  // open spans of the current lane, innermost last
  for (size_t i : order) {
    Span& s = spans[i];
    s.self = s.end - s.start;
    if (!stack.empty() && spans[stack.back()].lane != s.lane) stack.clear();
    while (!stack.empty() && spans[stack.back()].end <= s.start) stack.pop_back();
    if (!stack.empty() && s.end <= spans[stack.back()].end) {
      Span& parent = spans[stack.back()];
      parent.self -= std::min(parent.self, s.end - s.start);
    }
    stack.push_back(i);
  }
}

double sweep_spans(const std::vector<Span>& spans, std::vector<double>& overlap_ns) {
  struct Edge {
    uint64_t t;
    int64_t lane;
    int delta;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * spans.size());
  for (const auto& s : spans) {
    if (s.end <= s.start) continue;
    edges.push_back({s.start, s.lane, +1});
    edges.push_back({s.end, s.lane, -1});
  }
  // Ends before starts at one instant: spans that touch do not overlap.
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.t != b.t ? a.t < b.t : a.delta < b.delta;
  });
  std::unordered_map<int64_t, int> open;  // spans open per lane
  int lanes = 0;                          // lanes with an open span
  double busy = 0, multi = 0;
  std::vector<uint64_t> times;  // every distinct edge time
  std::vector<double> cum;      // time with two or more lanes busy, up to times[i]
  uint64_t prev = edges.empty() ? 0 : edges.front().t;
  for (const auto& e : edges) {
    if (e.t != prev) {
      const double dt = double(e.t - prev);
      if (lanes >= 1) busy += dt;
      if (lanes >= 2) multi += dt;
      prev = e.t;
    }
    if (times.empty() || times.back() != e.t) {
      times.push_back(e.t);
      cum.push_back(multi);
    }
    int& n = open[e.lane];
    if (e.delta > 0 && n++ == 0) lanes++;
    if (e.delta < 0 && --n == 0) lanes--;
  }
  auto at = [&](uint64_t t) {
    return cum[size_t(std::lower_bound(times.begin(), times.end(), t) - times.begin())];
  };
  // While a span is open its own lane is busy: two or more busy lanes means
  // another lane is busy too.
  for (const auto& s : spans) {
    if (s.end <= s.start) continue;
    const double len = double(s.end - s.start);
    overlap_ns[s.kernel] += (at(s.end) - at(s.start)) * double(s.self) / len;
  }
  return busy;
}

}  // namespace cs
