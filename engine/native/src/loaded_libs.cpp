// loaded_libs.cpp: see loaded_libs.h.
#include "loaded_libs.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <vector>

namespace cs {
namespace {

// The file name's stem before ".so": libcudnn.so.9.19.0 -> libcudnn.
std::string stem(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const auto so = base.find(".so");
  return so == std::string::npos ? base : base.substr(0, so);
}

const std::vector<std::string>& watched() {
  static const std::vector<std::string> w = {"libcudnn",    "libnccl",        "libcublas", "libcublasLt",
                                             "libcudart",   "libnvrtc",       "libtorch_cuda",
                                             "libtorch_cpu", "libc10_cuda"};
  return w;
}

}  // namespace

nlohmann::json loaded_libraries() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
          static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
        return 0;
      },
      &paths);
  nlohmann::json j = nlohmann::json::object();
  for (const auto& p : paths) {
    const std::string s = stem(p);
    for (const auto& w : watched())
      if (s == w) {
        const auto slash = p.find_last_of('/');
        j[slash == std::string::npos ? p : p.substr(slash + 1)] = p;
      }
  }
  return j;
}

std::string cudnn_runtime_version() {
  void* h = dlopen("libcudnn.so.9", RTLD_NOLOAD | RTLD_LAZY);
  if (h == nullptr) h = dlopen("libcudnn.so.8", RTLD_NOLOAD | RTLD_LAZY);
  if (h == nullptr) return "";
  using GetVersion = size_t (*)();
  auto f = reinterpret_cast<GetVersion>(dlsym(h, "cudnnGetVersion"));
  const std::string v = f != nullptr ? std::to_string(f()) : "";
  dlclose(h);
  return v;
}

}  // namespace cs
