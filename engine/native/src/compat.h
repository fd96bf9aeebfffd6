// compat.h: every difference between libtorch 1.13 (Debian, CPU) and 2.x (pip,
// CUDA) the engine meets, in one place. The rest of the engine calls these.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <string>
#include <vector>

#define CS_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||     \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// Public scaled_dot_product_attention: 2.0.
#define CS_HAS_SDPA CS_TORCH_AT_LEAST(2, 0)
// at::_fused_adamw_ (CUDA): 2.1.
#if defined(CS_WITH_CUDA) && CS_TORCH_AT_LEAST(2, 1)
#define CS_HAS_FUSED_ADAMW 1
#else
#define CS_HAS_FUSED_ADAMW 0
#endif
// at::_fused_sgd_ (CUDA, momentum buffers, grad_scale and found_inf): 2.3; 2.4
// here, where its signature is the one this engine calls.
#if defined(CS_WITH_CUDA) && CS_TORCH_AT_LEAST(2, 4)
#define CS_HAS_FUSED_SGD 1
#else
#define CS_HAS_FUSED_SGD 0
#endif
// _foreach_mul_(TensorList, Tensor): 2.1.
#define CS_HAS_FOREACH_MUL_TENSOR CS_TORCH_AT_LEAST(2, 1)
// fp16 autocast on CPU: 2.1 (1.13 casts CPU ops to bf16 only).
#define CS_HAS_CPU_FP16_AUTOCAST CS_TORCH_AT_LEAST(2, 1)

namespace cs {
namespace compat {

inline std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

// Autocast for one device type: the setters take a device type from 2.4 on.
inline void set_autocast(c10::DeviceType dev, bool enabled, at::ScalarType dtype) {
#if CS_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(dev, enabled);
  if (enabled) at::autocast::set_autocast_dtype(dev, dtype);
#else
  if (dev == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
    if (enabled) at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    if (enabled) at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

inline bool autocast_enabled(c10::DeviceType dev) {
#if CS_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(dev);
#else
  return dev == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                      : at::autocast::is_cpu_enabled();
#endif
}

inline at::ScalarType autocast_dtype(c10::DeviceType dev) {
#if CS_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(dev);
#else
  return dev == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                      : at::autocast::get_autocast_cpu_dtype();
#endif
}

// The dtype an op on x computes in: autocast's on x's device when it is on,
// else x's own.
inline at::ScalarType compute_dtype(const torch::Tensor& x) {
  const auto dev = x.device().type();
  return autocast_enabled(dev) ? autocast_dtype(dev) : x.scalar_type();
}

// Whether attention runs as matmul, softmax, matmul where SDPA exists: the
// environment's CASESTUDY_ATTENTION=math, as apply_math_mode (precision.cpp)
// read it at the trainer's init (a diagnostic: TestGPUBF16Diagnose compares
// bf16's deviation from fp32 with SDPA's fused kernels and without them).
inline bool& attention_math() {
  static bool math = false;
  return math;
}

// Causal self-attention over q, k, v [B, H, T, D]. 2.x: SDPA (flash or
// memory-efficient kernels on CUDA); 1.13 or attention_math(): matmul, causal
// mask, softmax, matmul.
inline torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v) {
#if CS_HAS_SDPA
  if (!attention_math())
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                            /*is_causal=*/true);
#endif
  const auto T = q.size(-2);
  auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  auto mask = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(q.device()))
                  .triu(1);
  att = att.masked_fill(mask, -std::numeric_limits<float>::infinity());
  att = torch::softmax(att, -1);
  return torch::matmul(att, v);
}

// Bidirectional self-attention over q, k, v [B, H, T, D] without a mask (BERT).
// 2.x: SDPA; 1.13 or attention_math(): matmul, softmax, matmul.
inline torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v) {
#if CS_HAS_SDPA
  if (!attention_math()) return at::scaled_dot_product_attention(q, k, v);
#endif
  auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  return torch::matmul(torch::softmax(att, -1), v);
}

// a @ b with the result in dtype out. Where torch has mm's out_dtype overload
// (aten::mm.dtype: CUDA, bf16 or fp16 inputs, an fp32 result straight from the
// matmul's accumulator) it is used for CUDA tensors: no rounding to the
// inputs' dtype and no cast kernel after. Else the matmul in the inputs' dtype,
// then a cast. Looked up by name, so that any torch builds this.
inline torch::Tensor mm_to(const torch::Tensor& a, const torch::Tensor& b, at::ScalarType out) {
  using Sig = at::Tensor(const at::Tensor&, const at::Tensor&, at::ScalarType);
  static const auto op = []() -> c10::optional<c10::TypedOperatorHandle<Sig>> {
    auto h = c10::Dispatcher::singleton().findSchema({"aten::mm", "dtype"});
    if (!h) return c10::nullopt;
    try {
      return h->typed<Sig>();  // throws where the schema has another signature
    } catch (const std::exception&) {
      return c10::nullopt;
    }
  }();
  if (op && a.is_cuda() && out == at::kFloat &&
      (a.scalar_type() == at::kBFloat16 || a.scalar_type() == at::kHalf))
    return op->call(a, b, out);
  return torch::mm(a, b).to(out);
}

// grads *= coef (a 0-d tensor on the same device), without a host sync.
inline void foreach_mul(const std::vector<torch::Tensor>& ts, const torch::Tensor& coef) {
#if CS_HAS_FOREACH_MUL_TENSOR
  at::_foreach_mul_(ts, coef);
#else
  for (const auto& t : ts) t.mul_(coef);
#endif
}

// A profiler event's start and length in ns (torch::autograd::profiler::
// KinetoEvent): startNs/durationNs from 2.1, startUs/durationUs before. Call
// with 0: the ns accessors where the event has them.
template <typename E>
auto event_start_ns(const E& e, int) -> decltype(uint64_t(e.startNs())) {
  return e.startNs();
}
template <typename E>
uint64_t event_start_ns(const E& e, long) {
  return uint64_t(e.startUs()) * 1000;
}
template <typename E>
auto event_duration_ns(const E& e, int) -> decltype(uint64_t(e.durationNs())) {
  return e.durationNs();
}
template <typename E>
uint64_t event_duration_ns(const E& e, long) {
  return uint64_t(e.durationUs()) * 1000;
}

}  // namespace compat
}  // namespace cs
