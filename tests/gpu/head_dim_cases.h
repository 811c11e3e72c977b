// GPU cases at head dims between the tile sizes (the kernels pad their tiles to 32, 64, 96,
// 128 or 256 inside: templates/attnjit/common/kernel_config.h), for the forward and the
// backward correctness tests: ragged lengths, GQA and MQA, Dqk != Dv, every dtype, sinks
// and a gate, the fused and the two-pass backward.
#pragma once

#include <vector>

#include "tests/gpu/gpu_test_support.h"

namespace attnjit::gputest {

std::vector<Case> padded_head_dim_forward_cases();
std::vector<Case> padded_head_dim_backward_cases();

}  // namespace attnjit::gputest
