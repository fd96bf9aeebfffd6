// kernels.h: the engine's own CUDA kernels (src/cuda/*.cu) and their switch.
//
// The kernels are compiled only where torch has CUDA and nvcc is found
// (CS_WITH_KERNELS); the CPU build, and a CUDA build with a kernel switched
// off, run the portable libtorch path of the same op. Each kernel has a name:
//   ce   GPT's cross-entropy over the logits in one pass per row (linear_ce.cpp)
//   ln   LayerNorm with the residual add fused, forward and backward
//        (add_layer_norm.h; GPT and BERT blocks)
//   bn   batch norm (+ residual add) + ReLU over channels_last activations,
//        forward and backward, ReLU mask as bits (bn_relu.h; ResNet)
//   pool max pooling over channels_last activations with a one-byte argmax
//        (max_pool.h; ResNet's stem)
//   lin  the transformer blocks' linear layers: the bias gradient summed in
//        one pass, the MLP's GELU backward fused in before it (linear_act.h)
//   stem ResNet's first convolution (over 3 channels) as one matrix product
//        of the input windows, gathered into rows by a kernel, and the
//        weight (stem_conv.h; ResNet's stem)
//   cast the linear layers' fp32 weights and biases cast to the autocast
//        dtype in one launch per 64 tensors (linear_casts.h; GPT and BERT)
//   res  with bn or ln: a normalized output that feeds two places returned
//        twice, so that its two gradients are added in the norm's backward
//        kernel, not by an add of their own (batch_norm_act_twin, bn_relu.h:
//        ResNet's blocks; add_layer_norm_twin, add_layer_norm.h: BERT's
//        LayerNorms)
//   qkv  with lin: the attention's qkv projection returns q, k and v, and its
//        backward gathers their gradients into its own and sums the bias
//        gradient in the same pass (linear_qkv, linear_act.h; GPT and BERT)
//   adam the AdamW step of every parameter (fp32) in one launch per 64
//        tensors, both groups together, the gradients only read
//        (Optimizer, optim.h; GPT and BERT)
//   fp8cast precision fp8's operand quantization: the amax (per tensor, row
//        or column) in one read, then scale and cast to FP8 with the scale
//        read on the device, the transposed copy the backward needs written
//        from the same read (fp8_linear.h; GPT and BERT under precision fp8)
//   lnb  with ln and lin: BERT's attention-output and MLP-output projections'
//        bias gradients summed by the LayerNorm's backward kernel after them
//        as it writes the projection's output gradient, not by a pass of
//        their own (linear_add_layer_norm_twin, add_layer_norm.h)
//   lny  with ln: BERT's LayerNorms (whose residual sum r nothing uses) store
//        r only where gamma is small; the backward recomputes the normalized
//        values from the output elsewhere (add_layer_norm_twin,
//        add_layer_norm.h). Off by default: measured after its small-gamma
//        fix, it cost ~1 ms a BERT-large 512 step on an H100 (one launch
//        each, in two calls; docs/perf.md "Twenty-fourth session")
//   rand the synthetic data's keyed draws (RowRandom, row_random.h) in one
//        pass a draw, the tensor ops' values (every family's data source)
//   adamc with adam and cast: the AdamW kernel writes the linear layers'
//        bf16/fp16 weights and biases (the cast's values) as it updates their
//        fp32 masters, and the next forward casts only those something else
//        wrote since (LinearCopies, linear_casts.h; GPT and BERT)
// CASESTUDY_KERNELS, read once per process, picks them: unset, empty or
// "default": every compiled kernel but those off by default (lny); "all":
// every compiled kernel; "native" or "none": none; else a comma-separated list
// of names to use ("ce,ln"), or of names to leave out of the base set (the
// default, or "all") or add to it, each with a leading '-' or '+', applied in
// order ("-bn", "+lny"; "all,-bn": every kernel but bn). Two base keywords,
// or "all"/"default" with a plain list, are errors.
// An unknown name is an error (std::invalid_argument at first use).
//
// Tests can also run the kernels' host versions (host_kernels.h) on CPU
// tensors (set_host_for_tests): the same autograd functions, saved tensors
// and gradients as on the GPU, with host loops where the CUDA kernels run, so
// that the CPU build checks the C++ side of every kernel.
#pragma once

#include <string>

namespace cs {
namespace kernels {

// Whether the engine was built with its CUDA kernels.
bool compiled();

// Whether kernel name is switched on (CASESTUDY_KERNELS) and can run: compiled,
// or its host version under set_host_for_tests.
bool enabled(const char* name);

// The kernels in use, comma-separated ("ce,ln,bn,pool,lin,stem,cast,res,qkv,adam,fp8cast,lnb,rand,adamc"), "none"
// when none: for cs_info.
std::string in_use();

// Replaces the switch as if CASESTUDY_KERNELS were value (tests only; not
// thread-safe against concurrent enabled()).
void set_for_tests(const std::string& value);

// Parses a CASESTUDY_KERNELS value into a set of switched-on names, as a
// comma-separated string in the order of the list above (tests).
std::string parse(const std::string& value);

// Whether the kernels' host versions run on CPU tensors (tests only; off in
// the engine, whose CPU path is the portable libtorch one).
void set_host_for_tests(bool on);
bool host_for_tests();

}  // namespace kernels
}  // namespace cs
