// Every example spec (dsl/example_specs.h) and every ready-made modifier compiles with
// NVRTC for sm_80 and sm_90a, for f16 / bf16 / f32 and head dims 64 and 128 (plain also
// 32, 96, 256), with the default tile; BackwardCompiles does the same for both backward
// kernels. One test per spec; its dtype x head dim x
// arch matrix compiles on all cores (NVRTC takes a second or two per kernel).
#include <gtest/gtest.h>

#include "dsl/example_specs.h"
#include "dsl/mods.h"
#include "dsl/vars.h"
#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "runtime/compiler.h"
#include "runtime/cuda_api.h"
#include "tests/nvrtc/compile_jobs.h"

namespace attnjit::codegen {
namespace {

using dsl::example_names;
using dsl::example_specs;
using dsl::modifier_specs;

using Job = CompileJob;

using SpecFactory = std::vector<std::pair<std::string, dsl::AttentionSpec>> (*)(DType, int);

void compile_matrix(const std::string& name, SpecFactory factory, const std::vector<int>& head_dims) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<Job> jobs;
    for (DType d : {DType::f16, DType::bf16, DType::f32})
        for (int hd : head_dims)
            for (const auto& [n, spec] : factory(d, hd)) {
                if (n != name) continue;
                for (const char* arch : {"sm_80", "sm_90a"})
                    jobs.push_back({name + " " + dtype_name(d) + " d" + std::to_string(hd) + " " + arch,
                                    generate(spec, make_config(spec, KernelKind::forward, arch), arch), arch});
            }
    ASSERT_FALSE(jobs.empty()) << "no spec named " << name;
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

class ExampleCompiles : public ::testing::TestWithParam<std::string> {};

TEST_P(ExampleCompiles, ForSm80AndSm90a) {
    const std::string& name = GetParam();
    std::vector<int> dims = {64, 128};
    if (name == "plain") dims = {32, 64, 96, 128, 256};
    compile_matrix(name, &example_specs, dims);
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleCompiles, ::testing::ValuesIn(example_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

std::vector<std::string> modifier_names() {
    std::vector<std::string> names;
    for (const auto& [n, s] : modifier_specs()) names.push_back(n);
    return names;
}

class ModifierCompiles : public ::testing::TestWithParam<std::string> {};

TEST_P(ModifierCompiles, ForSm80AndSm90a) { compile_matrix(GetParam(), &modifier_specs, {64, 128}); }

INSTANTIATE_TEST_SUITE_P(Modifiers, ModifierCompiles, ::testing::ValuesIn(modifier_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The backward kernels of every example spec compile (the fast backward's three too where
// it exists): f16, bf16 (the sm80 loops) and f32 (simt) at head dim 64 for sm_90a, and plain at every head dim (d256:
// backward_fused in column halves, besides the two-pass simt kinds) and Dqk != Dv for sm_80, and at d128 and d256 for
// sm_86 (the 99 KiB tiles; d256 without backward_fused there).
class BackwardCompiles : public ::testing::TestWithParam<std::string> {};

TEST_P(BackwardCompiles, BothKinds) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    const std::string& name = GetParam();
    std::vector<Job> jobs;
    auto add = [&](const dsl::AttentionSpec& spec, const char* arch, const std::string& what) {
        const bool fused =
            fused_backward_runs(elem_kind(spec.dtype()), spec.head_dim_qk(), spec.head_dim_v(), sm_version(arch));
        for (KernelKind kind : {KernelKind::backward_dkdv, KernelKind::backward_dq, KernelKind::backward_stats,
                                KernelKind::backward_fused, KernelKind::backward_dq_convert})
            if (fused || kind == KernelKind::backward_dkdv || kind == KernelKind::backward_dq)
                jobs.push_back({what + " " + kernel_kind_name(kind) + " " + arch,
                                generate(spec, make_config(spec, kind, arch), arch), arch});
        if (spec.has_sinks())  // attention sinks: their gradient's kernel
            jobs.push_back({what + " backward_sink_grad " + arch,
                            generate(spec, make_config(spec, KernelKind::backward_sink_grad, arch), arch), arch});
    };
    for (DType d : {DType::f16, DType::bf16, DType::f32})
        for (const auto& [n, spec] : example_specs(d, 64))
            if (n == name) add(spec, "sm_90a", name + " " + dtype_name(d) + " d64");
    if (name == "plain") {
        for (int hd : {32, 96, 128, 256})
            for (const auto& [n, spec] : example_specs(DType::bf16, hd))
                if (n == name) add(spec, "sm_80", name + " bf16 d" + std::to_string(hd));
        for (int hd : {64, 128, 256})  // the 99 KiB tiles
            for (const auto& [n, spec] : example_specs(DType::f16, hd))
                if (n == name) add(spec, "sm_86", name + " f16 d" + std::to_string(hd));
        dsl::AttentionSpec uneven;
        uneven.dtype(DType::f16).head_dims(128, 64);
        add(uneven, "sm_80", "plain f16 d128x64");
    }
    if (name == "sinks_sliding_window") {
        // Sinks of every float dtype, with a score_mod (scl = log2 e) and at d256 (simt), Dqk != Dv.
        for (DType sd : {DType::f16, DType::bf16}) {
            dsl::AttentionSpec s = dsl::example_spec(name, DType::bf16, 64);
            add(s.sinks("sinks", sd).score_mod(dsl::mods::softcap(dsl::scalar("cap"))), "sm_80",
                name + " bf16 d64 softcap sinks " + dtype_name(sd));
        }
        add(dsl::example_spec(name, DType::f16, 256), "sm_80", name + " f16 d256");
        // A Variant that reads q_len and kv_len (bottom-right causal) in every kind's Params.
        dsl::AttentionSpec br = dsl::example_spec(name, DType::f32, 64);
        add(br.mask(dsl::mods::causal(dsl::mods::CausalAlign::BottomRight)), "sm_80", name + " f32 d64 bottom-right");
        dsl::AttentionSpec uneven = dsl::example_spec(name, DType::f16, 64);
        add(uneven.head_dims(128, 64), "sm_80", name + " f16 d128x64");
    }
    ASSERT_FALSE(jobs.empty()) << "no spec named " << name;
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Examples, BackwardCompiles, ::testing::ValuesIn(example_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace attnjit::codegen
