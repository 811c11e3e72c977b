// Shared by the GPU correctness tests: the case description (modifier, dtype, head dims,
// lengths, heads, layout), building its spec and fresh seeded inputs, running it through
// attnjit::Attention with poisoned outputs, and comparing with the fp64 reference.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "reference/attention_reference.h"
#include "reference/host_tensor.h"
#include "api/attention.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"

// First line of every GPU test: skips (never fails) with the reason when no GPU is usable.
#define ATTNJIT_SKIP_WITHOUT_GPU()                                                 \
    do {                                                                           \
        if (auto attnjit_why_no_gpu = ::attnjit::runtime::why_no_gpu())            \
            GTEST_SKIP() << "no usable GPU: " << *attnjit_why_no_gpu;              \
    } while (0)

namespace attnjit::gputest {

using reference::HostTensor;

// The ready-made modifiers of dsl/mods.h under test.
enum class Mod {
    Plain,
    CausalTopLeft,
    CausalBottomRight,
    SlidingWindow,   // sliding_window(int_scalar window, BottomRight)
    AlibiCausal,     // alibi(slopes[Hq]) + causal top-left
    Softcap,         // softcap(scalar cap)
    BiasBroadcast,   // bias([1, Hq, Nq, Nk] broadcast over B by stride 0), dtype of Q
    BiasPadded,      // bias([B, Hq, Nq, Nk] with 16-byte aligned rows past Nk), dtype of Q
    RelativePosition,  // relative_position_bias(table[Hq, 2*32+1], 32)
    DocumentMask,    // document_mask(q_doc[B, Nq], kv_doc[B, Nk])
    PrefixLm,        // prefix_lm(int_scalar prefix)
    Combination,     // score_mod softcap(relpos) + mask causal bottom-right && document
};
const char* mod_name(Mod m);
std::vector<Mod> all_mods();

enum class Layout {
    BHND,  // [B, H, N, D] contiguous
    BNHD,  // [B, N, H, D] memory order, viewed as [B, H, N, D] through strides (no copy)
};

struct Case {
    Mod mod = Mod::Plain;
    DType dtype = DType::bf16;
    int dqk = 128, dv = 128;
    int batch = 1, hq = 4, hkv = 4;
    int nq = 1, nk = 1;
    Layout layout = Layout::BHND;
    bool lse = true;
    // Attention sinks of this dtype (tensor "sinks" [Hq], seeded values around the rows'
    // LSE so that they matter; with Hq >= 4 the last head's is -inf, no sink), or none.
    std::optional<DType> sinks;
    // An output gate (tensor "gate" [B, Hq, Nq, Dv] of the case's dtype and layout, N(0, 1)
    // logits): out = sigmoid(gate) * O; the backward also checks d gate.
    bool gate = false;
    // CompileOptions.mainloop: unset, the default loop (sm90 on an H100 where it carries the case).
    std::optional<MainloopKind> mainloop;

    // A readable, unique, gtest-safe name: "bf16_d128_causal_br_b2_h4x2_q17_k255".
    std::string name() const;
    // A per-case seed (FNV-1a of the name): every case draws its own inputs.
    uint64_t seed() const;
};
std::ostream& operator<<(std::ostream& os, const Case& c);

// The forward correctness matrix (see forward_correctness_test.cpp for what it covers).
std::vector<Case> forward_matrix();
// The cases of `cases` that the sm90 loop carries (f16 / bf16, its head dims), forced onto the
// sm80 loop: where sm90 is the default (an H100), both loops then run them.
std::vector<Case> on_sm80_loop(const std::vector<Case>& cases);

// The spec of a case (return_lse as asked; heads left to the tensors, so GQA and MHA
// share one kernel).
dsl::AttentionSpec make_spec(const Case& c);

// Host and device data of one problem. Inputs are fresh N(0, 1) values rounded to the
// dtype, seeded by the case; outputs are poisoned (reference::fill_poison) on host and
// device before every launch.
struct Problem {
    Case c;
    dsl::AttentionSpec spec;
    reference::ForwardInputs in;
    HostTensor o, lse;  // host mirrors of the outputs (lse empty when not asked)
    runtime::DeviceTensor dev_q, dev_k, dev_v, dev_o, dev_lse;  // device copies
    std::map<std::string, runtime::DeviceTensor> d_tensors;

    LaunchArgs args() const;
    // Poisons o and lse on the host and uploads the poison to the device.
    void poison_outputs();
    // Downloads o and lse (synchronises first).
    void download_outputs();
};
// upload = false builds the host side only (inputs, poisoned outputs): no GPU needed.
Problem make_problem(const Case& c, bool upload = true);

// The result of checking one output against the reference.
struct Check {
    bool ok = true;
    std::string message;  // empty when ok
};

// Compares `actual` with `expected` under `tol`: NaN, poison (never written) and
// mismatched infinities fail; the message names `what`, the max error and where it is,
// and the reference's report of the first failing elements.
Check check_output(const std::string& what, const HostTensor& actual,
                   const reference::DoubleTensor& expected, reference::Tolerance tol);

// A gradient at the dtype's tolerance relative to its largest reference element
// (reference::gradient_tolerance); a gradient summed over many score elements (d theta, d
// alpha, d sinks) at reference::summed_gradient_tolerance, relative to the same.
double max_abs(const reference::DoubleTensor& t);
Check check_gradient(const std::string& what, const HostTensor& actual, const reference::DoubleTensor& expected,
                     DType dt);
Check check_summed_gradient(const std::string& what, const HostTensor& actual, const reference::DoubleTensor& expected,
                            DType dt);

// A case with attention sinks of `sinks_dtype` (f32, f16, bf16).
Case with_sinks(Case c, DType sinks_dtype = DType::f32);
// A case with an output gate.
Case with_gate(Case c);
// The gate cases of the forward and backward matrices: every dtype, both backwards (d64),
// two-pass only (d32 with a broadcast bias, as AlphaFold's pair bias; a document mask), a
// strided gate ([B, N, H, D]), with sinks and a score_mod, d256 (simt).
std::vector<Case> gate_cases();

// Rows with no kept key (reference LSE = -inf) must be O = 0 exactly and LSE = -inf.
// Returns the number of such rows through `rows` and fails naming the first bad one.
Check check_fully_masked_rows(const std::string& what, const HostTensor& o, const HostTensor* lse,
                              const reference::DoubleTensor& ref_lse, int64_t* rows = nullptr);

// True when every logical element of `t` still holds the poison pattern.
bool all_poison(const HostTensor& t);

// Batch, heads and lengths of a case.
struct Shape {
    int batch, hq, hkv, nq, nk;
};
// A case with Dqk = Dv = head_dim, the BHND layout and LSE returned.
Case make_case(Mod mod, DType dtype, int head_dim, Shape shape);

// A small ragged GQA case of `mod` (bf16, D = 128, B = 2, Hq = 4, Hkv = 2, Nq = 129,
// Nk = 255) for tests about the API around the kernel rather than its numerics.
Case small_case(Mod mod);

// Runs a whole case: compile (through the caches), poison, launch, synchronise, compare O
// and LSE with the reference. The message names the case.
Check run_case(const Case& c);

}  // namespace attnjit::gputest
