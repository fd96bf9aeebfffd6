// kernels.cpp: see kernels.h.
#include "kernels.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace cs {
namespace kernels {
namespace {

const std::vector<std::string>& names() {
  static const std::vector<std::string> n = {"ce",   "ln",  "bn",  "pool", "lin",
                                             "stem", "cast", "res", "qkv",  "adam",
                                             "fp8cast", "lnb", "lny", "rand",
                                             "adamc"};
  return n;
}

// Compiled but off unless asked for ("all", "+lny" or a list naming it): "lny"
// was slower than without it on BERT-large 32 x 512 on an H100 at 58a5cfc
// (73.6 ms a step against 72.6, one launch each; its LayerNorm kernels 1.7 ms
// slower in the profile: docs/perf.md "Twenty-fourth session"). It never ran
// on a GPU before its small-gamma fix.
bool off_by_default(const std::string& n) { return n == "lny"; }

bool known(const std::string& n) {
  for (const auto& k : names())
    if (k == n) return true;
  return false;
}

// The switched-on names ("ce,ln") and the same as bits by position in names().
struct Switch {
  std::string on;
  unsigned bits = 0;
  void set(const std::string& value) {
    on = parse(value);
    bits = 0;
    std::stringstream ss(on);
    for (std::string item; std::getline(ss, item, ',');)
      for (size_t i = 0; i < names().size(); i++)
        if (names()[i] == item) bits |= 1u << i;
  }
};

bool host_mode = false;  // set_host_for_tests

Switch& switched_on() {
  static Switch s = [] {
    Switch w;
    const char* v = std::getenv("CASESTUDY_KERNELS");
    w.set(v ? v : "");
    return w;
  }();
  return s;
}

}  // namespace

bool compiled() {
#ifdef CS_WITH_KERNELS
  return true;
#else
  return false;
#endif
}

std::string parse(const std::string& value) {
  std::vector<std::string> items;
  std::stringstream ss(value);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos) items.push_back(item.substr(b, e - b + 1));
  }
  std::vector<bool> on(names().size());
  for (size_t i = 0; i < names().size(); i++) on[i] = !off_by_default(names()[i]);
  // The base set: the default, every kernel ("all") or none ("native"),
  // wherever the keyword stands; a plain name lists the kernels to use (after
  // "native" at most: "native,pool"); '-name' and '+name' change the base set,
  // in the list's order.
  bool any_plain = false, any_signed = false;
  std::string base;
  for (const auto& it : items) {
    if (it == "default" || it == "all" || it == "native" || it == "none") {
      const std::string b = it == "none" ? "native" : it;
      if (!base.empty() && base != b)
        throw std::invalid_argument("CASESTUDY_KERNELS=" + value + ": \"" + base + "\" and \"" + b +
                                    "\" together; name one base set (default, all or native)");
      base = b;
      if (b == "all") on.assign(on.size(), true);
      if (b == "native") on.assign(on.size(), false);
      continue;
    }
    const bool sign = it[0] == '-' || it[0] == '+';
    const std::string n = sign ? it.substr(1) : it;
    if (!known(n)) {
      std::string all;
      for (const auto& k : names()) all += (all.empty() ? "" : ", ") + k;
      throw std::invalid_argument("CASESTUDY_KERNELS: unknown kernel \"" + n +
                                  "\"; use default, all, native, or names among " + all +
                                  " (each optionally with a leading '-' or '+')");
    }
    (sign ? any_signed : any_plain) = true;
  }
  if (any_plain && any_signed)
    throw std::invalid_argument("CASESTUDY_KERNELS=" + value +
                                ": list the kernels to use, or those to leave out ('-name') "
                                "or add ('+name'), not both");
  if (any_plain && (base == "all" || base == "default"))
    throw std::invalid_argument("CASESTUDY_KERNELS=" + value + ": \"" + base +
                                "\" with a list of kernels to use; give the list alone, or '-name'/'+name' after \"" +
                                base + "\"");
  if (any_plain) on.assign(on.size(), false);
  for (const auto& it : items) {
    const bool minus = it[0] == '-', plus = it[0] == '+';
    const std::string n = minus || plus ? it.substr(1) : it;
    for (size_t i = 0; i < names().size(); i++)
      if (names()[i] == n) on[i] = !minus;
  }
  std::string out;
  for (size_t i = 0; i < names().size(); i++)
    if (on[i]) out += (out.empty() ? "" : ",") + names()[i];
  return out;
}

void set_for_tests(const std::string& value) { switched_on().set(value); }

void set_host_for_tests(bool on) { host_mode = on; }
bool host_for_tests() { return host_mode; }

bool enabled(const char* name) {
  if (!compiled() && !host_mode) return false;
  const unsigned bits = switched_on().bits;
  for (size_t i = 0; i < names().size(); i++)
    if (names()[i] == name) return (bits >> i) & 1u;
  return false;
}

std::string in_use() {
  if (!compiled()) return "none";
  const std::string& on = switched_on().on;
  return on.empty() ? "none" : on;
}

}  // namespace kernels
}  // namespace cs
