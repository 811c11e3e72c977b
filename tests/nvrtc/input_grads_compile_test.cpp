// The backward_dq kernels that compute gradients of captured tensors and scalars
// (common/input_grads.cuh, codegen/input_grads.h) compile with NVRTC: every spec of
// tests/common/input_grad_specs.h for bf16 (sm80 loop) and f32 (simt), some for f16, d128
// and sm_90a, with f32 and bf16 bias gradients; and both backward kinds of the specs with
// per-query and per-key reads.
#include <gtest/gtest.h>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "codegen/lower.h"
#include "common/input_grad_specs.h"
#include "runtime/compiler.h"
#include "runtime/cuda_api.h"

namespace attnjit::codegen {
namespace {

void compile_one(const testing::InputGradSpec& s, const std::string& arch, const std::string& what) {
    const KernelSource k = generate(lower(s.spec, spec_inputs(s.spec), KernelKind::backward_dq, s.grads),
                                    make_config(s.spec, KernelKind::backward_dq, arch), arch);
    ASSERT_NE(k.source.find("kInputGrads = true"), std::string::npos) << what;
    try {
        runtime::CompiledKernel c = runtime::compile_kernel(k, arch);
        EXPECT_FALSE(c.cubin.empty()) << what;
    } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": " << e.what();
    }
}

TEST(InputGradsCompile, EverySpecDtypeAndArch) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    // Every spec for bf16 (sm80 loop) and f32 (simt) at d64; f16 for two; the combined
    // spec at d128 for sm_90a.
    for (DType d : {DType::bf16, DType::f32, DType::f16})
        for (const auto& s : testing::input_grad_specs(d, 64))
            if (d != DType::f16 || s.name == "bias_causal" || s.name == "bias_alibi_softcap")
                compile_one(s, "sm_80", s.name + " " + dtype_name(d) + " d64 sm_80");
    for (const auto& s : testing::input_grad_specs(DType::bf16, 128))
        if (s.name == "bias_alibi_softcap") compile_one(s, "sm_90a", s.name + " bf16 d128 sm_90a");
}

TEST(InputGradsCompile, Bf16BiasGradient) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    for (const auto& s : testing::input_grad_specs(DType::bf16, 64, DType::bf16))
        if (s.name == "bias_causal" || s.name == "bias_alibi_softcap")
            compile_one(s, "sm_80", s.name + " bf16 bias");
}

// backward_dkdv: without elementwise gradients its kernel is the one without gradients; with
// them it sums their planes (kInputGradPlanes) and compiles.
TEST(InputGradsCompile, DkdvSumsPlanesOnlyForElementwiseGradients) {
    const bool nvrtc = !runtime::why_no_libnvrtc();
    for (DType d : {DType::bf16, DType::f32})
        for (const auto& s : testing::input_grad_specs(d, 64)) {
            const auto c = make_config(s.spec, KernelKind::backward_dkdv, "sm_80");
            const KernelSource with = generate(lower(s.spec, spec_inputs(s.spec), KernelKind::backward_dkdv, s.grads), c, "sm_80");
            const KernelSource without = generate(lower(s.spec, spec_inputs(s.spec), KernelKind::backward_dkdv), c, "sm_80");
            bool stored = false;
            for (const auto& g : s.grads) stored = stored || testing::stored_grad(g);
            EXPECT_EQ(with.source == without.source, !stored) << s.name;
            EXPECT_EQ(with.source.find("kInputGradPlanes = true") != std::string::npos, stored) << s.name;
            if (stored && nvrtc) {
                try {
                    EXPECT_FALSE(runtime::compile_kernel(with, "sm_80").cubin.empty()) << s.name;
                } catch (const std::exception& e) {
                    ADD_FAILURE() << s.name << " backward_dkdv: " << e.what();
                }
            }
        }
}

// Per-query (backward_dq) and per-key (backward_dkdv) sums: both kinds of every spec with
// such reads compile for bf16 and f32 (simt) at d64; two of them also for f16 d128, bf16
// d256 (simt) and bf16 d128 sm_90a. backward_dkdv has the per-key hooks exactly when a
// per-key gradient is asked for.
void compile_kind(const testing::InputGradSpec& s, KernelKind kind, const std::string& arch, const std::string& what) {
    const KernelSource k =
        generate(lower(s.spec, spec_inputs(s.spec), kind, s.grads), make_config(s.spec, kind, arch), arch);
    bool key = false, query = false;
    for (const auto& g : s.grads) {
        key = key || testing::key_grad(g);
        query = query || (testing::stored_grad(g) && !testing::key_grad(g) && g != "bias");
    }
    if (kind == KernelKind::backward_dkdv) {
        EXPECT_EQ(k.source.find("kInputGradKeySites = ") != std::string::npos, key) << what;
        EXPECT_EQ(k.source.find("input_grads_key_store(") != std::string::npos, key) << what;
        EXPECT_EQ(k.source.find("input_grads_query_store(") != std::string::npos, false) << what;
    } else {
        EXPECT_EQ(k.source.find("kInputGradQuerySites = ") != std::string::npos, query) << what;
        EXPECT_EQ(k.source.find("input_grads_key("), std::string::npos) << what;
    }
    if (runtime::why_no_libnvrtc()) return;
    try {
        EXPECT_FALSE(runtime::compile_kernel(k, arch).cubin.empty()) << what;
    } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": " << e.what();
    }
}

bool row_spec(const testing::InputGradSpec& s) {
    for (const auto& g : s.grads)
        if (testing::stored_grad(g) && g != "bias") return true;
    return false;
}

TEST(InputGradsCompile, PerQueryAndPerKeyEveryKind) {
    int specs = 0;
    for (DType d : {DType::bf16, DType::f32})
        for (const auto& s : testing::input_grad_specs(d, 64)) {
            if (!row_spec(s)) continue;
            ++specs;
            for (KernelKind kind : {KernelKind::backward_dq, KernelKind::backward_dkdv})
                compile_kind(s, kind, "sm_80",
                             s.name + " " + dtype_name(d) + " d64 sm_80 " + kernel_kind_name(kind));
        }
    EXPECT_EQ(specs, 10);
    struct Case {
        DType dtype;
        int head_dim;
        const char* arch;
    };
    for (const Case& c : {Case{DType::f16, 128, "sm_80"}, Case{DType::bf16, 256, "sm_80"}, Case{DType::bf16, 128, "sm_90a"}})
        for (const auto& s : testing::input_grad_specs(c.dtype, c.head_dim))
            if (s.name == "row_col_mix" || s.name == "k_bias_window_softcap")
                for (KernelKind kind : {KernelKind::backward_dq, KernelKind::backward_dkdv})
                    compile_kind(s, kind, c.arch,
                                 s.name + " " + dtype_name(c.dtype) + " d" + std::to_string(c.head_dim) + " " + c.arch +
                                     " " + kernel_kind_name(kind));
}

}  // namespace
}  // namespace attnjit::codegen
