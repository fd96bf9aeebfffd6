// ready_hook.h: the post-hook on a parameter's AccumulateGrad node through
// which the data-parallel reducers (reducer.cpp, zero_reducer.cpp) learn that
// the parameter's gradient for this backward is complete.
#pragma once

#include <torch/csrc/autograd/function_hook.h>

#include <functional>
#include <utility>

namespace cs {

// Calls fn after the AccumulateGrad node it is attached to has run.
class ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  explicit ReadyHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

}  // namespace cs
