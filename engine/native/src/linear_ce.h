// linear_ce.h: a language model's output head (GPT-2's tied head, BERT's MLM
// decoder with its bias) and cross-entropy in one autograd function.
//
// The plain way (torch::linear, then cross_entropy on fp32 logits, as Hugging
// Face's GPT-2 does) writes and re-reads [tokens, vocab] tensors about ten
// times per step: bf16 logits, their fp32 copy, the fp32 log-softmax, and in
// the backward a zero-filled fp32 gradient, the log-softmax gradient and its
// cast back. For GPT-2 124M at 16 x 1024 tokens each is 1.6-3.3 GB. Here the
// forward pass computes the logits once (in the autocast dtype, against the
// vocabulary padded to a multiple of 64 so that the matmuls see aligned
// leading dimensions), then row-chunk by row-chunk (each chunk's fp32
// temporaries small enough for L2) the loss and d loss / d logits =
// softmax - one-hot, written over the logits; the backward pass is two matmuls.
// On CUDA with the engine's "ce" kernel (kernels.h) the chunks give way to one
// kernel that reads each row once for its max and sum of exponentials in fp32
// and writes softmax - one-hot over it (llm.c's fused classifier).
//
// Targets must be valid class indices (no ignore_index): the GPT data never
// produces -100, and BERT's head passes only its masked positions' labels.
#pragma once

#include <torch/torch.h>

namespace cs {

// The mean over rows of -log softmax(h weight^T + bias)[target]: h [N, d] (any
// float dtype), weight [V, d], target [N] int64, bias [V] or undefined (none).
// Matmuls run in the autocast dtype when autocast is on for h's device, else in
// h's dtype. chunk_rows > 0 sets the rows per chunk of the portable path
// (tests); 0 picks about 8 M logits per chunk.
torch::Tensor linear_cross_entropy(const torch::Tensor& h, const torch::Tensor& weight,
                                   const torch::Tensor& target, int64_t chunk_rows = 0,
                                   const torch::Tensor& bias = torch::Tensor());

}  // namespace cs
