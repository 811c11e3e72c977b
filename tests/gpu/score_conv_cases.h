// The score convolution's GPU test cases (score_conv_test, score_conv_backward_test):
// shapes, the spec and N(0, 1) inputs with theta N(0, 0.3) plus 1 at the identity tap, and
// a forward run on the GPU.
#pragma once

#include <string>

#include "tests/gpu/gpu_test_support.h"

namespace attnjit::gputest {

// S0 is staged in f16 (11 bits a score, sm80/score_conv.cuh; the MTA reference code runs
// the whole convolution in bf16, 8 bits), so LSE is held to kScoreConvLseTolerance rather
// than the plain kernels' 1e-3; O keeps the dtype's tolerance.
constexpr reference::Tolerance kScoreConvLseTolerance{5e-3, 1e-4};

struct ConvCase {
    DType dtype = DType::bf16;
    int d = 128;
    int cq = 6, ck = 11;
    int batch = 1, hq = 4, hkv = 4, nq = 1, nk = 1;
    bool softcap = false, gate = false, sinks = false;

    std::string name() const;
    uint64_t seed() const;
};

dsl::AttentionSpec conv_spec(const ConvCase& c);
// Inputs: N(0, 1) Q, K, V; theta N(0, 0.3) plus 1 at the identity tap, so the result is
// neither plain causal attention nor noise; a gate N(0, 1), sinks N(2, 1), cap 3.
reference::ForwardInputs conv_inputs(const ConvCase& c);
// Sets theta to the identity kernel (theta[h][c_q - 1][p_k] = 1, zero elsewhere).
void set_identity_kernel(reference::ForwardInputs& in, const ConvCase& c);

struct ConvRun {
    HostTensor o, lse;
};
// attnjit's forward of spec on in (outputs poisoned first).
ConvRun run_on_gpu(const dsl::AttentionSpec& spec, const reference::ForwardInputs& in);

}  // namespace attnjit::gputest
