// families.cpp: the model family registry.
#include <map>

#include "bert.h"
#include "model.h"
#include "resnet.h"

namespace cs {

Family make_gpt_family();  // gpt.cpp
// BERT and ResNet-50: bert_family() and resnet50_family() (bert.h, resnet.h).

namespace {
const std::map<std::string, Family>& registry() {
  static const std::map<std::string, Family> table = {
      {"gpt", make_gpt_family()},
      {"bert", bert_family()},
      {"resnet50", resnet50_family()},
  };
  return table;
}
}  // namespace

const Family& family(const std::string& name) {
  const auto& t = registry();
  auto it = t.find(name);
  if (it != t.end()) return it->second;
  std::string names;
  for (const auto& kv : t) names += (names.empty() ? "" : ", ") + kv.first;
  throw ConfigError("family \"" + name + "\" is not known; valid: " + names);
}

std::vector<std::string> family_names() {
  std::vector<std::string> out;
  for (const auto& kv : registry()) out.push_back(kv.first);
  return out;
}

}  // namespace cs
