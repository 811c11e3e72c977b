// The score convolution's GPU test cases (score_conv_test, score_conv_backward_test):
// shapes, the spec and N(0, 1) inputs with theta N(0, 0.3) plus 1 at the identity tap, and
// a forward run on the GPU.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_support.h"

namespace attnjit::gputest {

// S0 is staged in f16 (11 bits a score, sm80/score_conv.cuh; the MTA reference code runs
// the whole convolution in bf16, 8 bits), so LSE is held to kScoreConvLseTolerance rather
// than the plain kernels' 1e-3; O keeps the dtype's tolerance.
constexpr reference::Tolerance kScoreConvLseTolerance{5e-3, 1e-4};

// The spec's mask with the convolution (it also gates the taps, docs/score_convolution.md).
enum class ConvMask {
    none,
    document,  // doc_ids[b, q_idx] == doc_ids[b, kv_idx]: packed documents of 1 to 160 rows
    window,    // q_idx - kv_idx < 77 (with the causal part: a sliding window)
    scatter,   // (7 q_idx + 3 kv_idx) % 11 != 0: no structure, every tile partial
};

struct ConvCase {
    DType dtype = DType::bf16;
    int d = 128;
    int cq = 6, ck = 11;
    int batch = 1, hq = 4, hkv = 4, nq = 1, nk = 1;
    bool softcap = false, gate = false, sinks = false;
    ConvMask mask = ConvMask::none;
    int d_v = 0;  // V's head dim when not d

    int dv() const { return d_v > 0 ? d_v : d; }
    std::string name() const;
    uint64_t seed() const;
};

// The cases both directions run: the kernel sizes 1x1, 3x3, 6x11, 8x15 at f16 / bf16 and
// head dims 64 / 128, Nq < Nk, Nq > Nk, GQA, a softcap score_mod, a gate with sinks.
std::vector<ConvCase> shared_conv_cases();
// The forward's cases with a mask: documents (short and long, ragged), a sliding window
// and a scattered mask, over kernel sizes 1x1 to 8x15.
std::vector<ConvCase> masked_conv_cases();

dsl::AttentionSpec conv_spec(const ConvCase& c);
// Inputs: N(0, 1) Q, K, V; theta N(0, 0.3) plus 1 at the identity tap, so the result is
// neither plain causal attention nor noise; a gate N(0, 1), sinks N(2, 1), cap 3; document
// ids [batch, nk] of packed documents whose lengths vary with the seed.
reference::ForwardInputs conv_inputs(const ConvCase& c);
// Sets theta to the identity kernel (theta[h][c_q - 1][p_k] = 1, zero elsewhere).
void set_identity_kernel(reference::ForwardInputs& in, const ConvCase& c);

// Q, K, V, the forward's outputs and the captured tensors on the device, and the
// LaunchArgs that name them (views of device memory: the struct may move).
struct ConvDeviceArgs {
    runtime::DeviceTensor q, k, v, o, lse;
    std::map<std::string, runtime::DeviceTensor> tensors;
    LaunchArgs args;
};
ConvDeviceArgs to_device_args(const reference::ForwardInputs& in, const HostTensor& o, const HostTensor& lse);

struct ConvRun {
    HostTensor o, lse;
};
// attnjit's forward of spec on in (outputs poisoned first; O [B, Hq, Nq, spec's Dv]), with
// `tile` if given.
ConvRun run_on_gpu(const dsl::AttentionSpec& spec, const reference::ForwardInputs& in,
                   const std::optional<TileConfig>& tile = std::nullopt);

}  // namespace attnjit::gputest
