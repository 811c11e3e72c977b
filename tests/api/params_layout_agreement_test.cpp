// The Params layout the host packs (api::prepare_kernel's layout) and the one the compiled
// kernel declares (its generated source) agree, for backward kernels whose Params carry
// gradient outputs and the GradWork: a mismatch is refused at launch
// (runtime/loaded_kernel.cpp), but only on a GPU; this finds it without one (NVRTC only).
#include <gtest/gtest.h>

#include "api/prepared_kernel.h"
#include "common/input_grad_specs.h"

namespace attnjit {
namespace {

TEST(ParamsLayoutAgreement, HostPacksWhatTheBackwardKernelDeclares) {
    // Per-key sums (backward_dkdv's GradWork ticket), per-CTA sums and a table site (backward_dq's).
    const std::pair<const char*, KernelKind> wanted[] = {{"kv_bias_causal", KernelKind::backward_dkdv},
                                                         {"relpos_kv_head_softcap", KernelKind::backward_dq}};
    int checked = 0;
    for (const auto& s : testing::input_grad_specs(DType::bf16, 64))
        for (const auto& [name, kind] : wanted) {
            if (s.name != name) continue;
            const codegen::SpecInputs inputs = codegen::spec_inputs(s.spec);
            const api::PreparedKernel k = api::prepare_kernel(s.spec, inputs, kind, {"sm_80", false}, std::nullopt, s.grads);
            const codegen::ParamsLayout declared = k.source(s.spec, inputs).layout;
            EXPECT_NE(k.layout.find("grad_work"), nullptr) << name;
            ASSERT_EQ(k.layout.size, declared.size) << name;
            ASSERT_EQ(k.layout.fields.size(), declared.fields.size()) << name;
            for (size_t i = 0; i < declared.fields.size(); ++i) {
                EXPECT_EQ(k.layout.fields[i].name, declared.fields[i].name) << name;
                EXPECT_EQ(k.layout.fields[i].offset, declared.fields[i].offset) << name << " " << declared.fields[i].name;
            }
            ++checked;
        }
    EXPECT_EQ(checked, 2);
}

}  // namespace
}  // namespace attnjit
