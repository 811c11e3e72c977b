// input_grads (codegen/input_grads.h): which gradients of captured tensors and scalars a
// backward_dq plan computes and how (stored elementwise, summed per CTA), the UserErrors for
// reads whose sums are not implemented, the emitted hooks, and that a backward asked for
// no gradient generates exactly the source it generated before.
#include <gtest/gtest.h>

#include "codegen/generate.h"
#include "codegen/input_grads.h"
#include "codegen/kernel_config.h"
#include "codegen/lower.h"
#include "codegen/params_layout.h"
#include "common/expect_error.h"
#include "common/input_grad_specs.h"
#include "dsl/dsl.h"
#include "dsl/mods.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

AttentionSpec with_mod(const Expr& mod) { return AttentionSpec().dtype(DType::bf16).head_dim(64).return_lse().score_mod(mod); }

TEST(InputGrads, PlanPerReadKind) {
    const Tensor bias("bias", DType::f16, 4), bias3("bias3", DType::f32, 3), slopes("slopes", DType::f32, 1),
        temp("temp", DType::f32, 1);
    // Elementwise, direct or through planes: stored.
    for (const Expr& mod : {score() + bias(batch(), head(), q_idx(), kv_idx()), score() + bias(0, head(), q_idx(), kv_idx())}) {
        const InputGradPlan p = plan_input_grads(with_mod(mod), {"bias"});
        ASSERT_EQ(p.sites.size(), 1u);
        EXPECT_TRUE(p.sites[0].store);
        EXPECT_TRUE(p.outputs[0].stored);
        EXPECT_EQ(p.sites[0].roles.size(), 4u);
    }
    const InputGradPlan p3 = plan_input_grads(with_mod(score() + bias3(head(), q_idx(), kv_idx())), {"bias3"});
    ASSERT_EQ(p3.sites.size(), 1u);
    EXPECT_TRUE(p3.sites[0].store);
    EXPECT_EQ(p3.sites[0].reduction.kind, GradReduction::Elementwise);
    EXPECT_TRUE(p3.sites[0].reduction.sums_batch);
    // Uniform: summed per CTA; a scalar too; outputs with per-CTA sites come first.
    const InputGradPlan pu = plan_input_grads(
        with_mod(scalar("cap") * tanh((score() + bias(batch(), head(), q_idx(), kv_idx()) + slopes(head()) * temp(0)) /
                                      scalar("cap"))),
        {"bias", "slopes", "temp", "cap"});
    ASSERT_EQ(pu.outputs.size(), 4u);
    EXPECT_EQ(pu.outputs[0].name, "cap");
    EXPECT_TRUE(pu.outputs[0].scalar);
    EXPECT_EQ(pu.outputs[3].name, "bias");
    int accums = 0, stores = 0;
    for (const auto& s : pu.sites) {
        if (s.store) ++stores;
        else EXPECT_EQ(s.accum, accums++);
    }
    EXPECT_EQ(stores, 1);
    EXPECT_EQ(accums, 3);
}

// A diagonal read (a relative-position table): a table site, summed per table element, no
// per-CTA slot, its hooks emitted; its output comes first with the per-CTA ones.
TEST(InputGrads, DiagonalReadSummedPerTableElement) {
    const Tensor table("table", DType::f32, 2), slopes("slopes", DType::f32, 1);
    const AttentionSpec s = with_mod(mods::relative_position_bias(table, 8) + slopes(head()) * (kv_idx() - q_idx()));
    const InputGradPlan p = plan_input_grads(s, {"table", "slopes"});
    ASSERT_EQ(p.sites.size(), 2u);
    int tables = 0;
    for (const auto& site : p.sites) {
        EXPECT_FALSE(site.store);
        if (site.table) {
            ++tables;
            EXPECT_EQ(site.table_dim, 1);
            EXPECT_EQ(site.accum, -1);
            EXPECT_EQ(p.outputs[static_cast<size_t>(site.output)].name, "table");
            EXPECT_FALSE(p.outputs[static_cast<size_t>(site.output)].stored);
        } else {
            EXPECT_EQ(site.accum, 0);
        }
    }
    EXPECT_EQ(tables, 1);
    const KernelPlan plan = lower(s, spec_inputs(s), KernelKind::backward_dq, {"table", "slopes"});
    EXPECT_EQ(plan.grad_accums(), 1);
    EXPECT_EQ(plan.grad_accum_outputs(), 2);
    EXPECT_GE(plan.grad_table_output(), 0);
    const std::string src = generate(plan, make_config(s, KernelKind::backward_dq, "sm_80"), "sm_80").source;
    EXPECT_NE(src.find("kInputGradTableOutput = " + std::to_string(plan.grad_table_output()) + ";"), std::string::npos);
    for (const char* hook : {"grad_table_len(", "grad_table_step(", "grad_table_dense(", "acc.table_add("})
        EXPECT_NE(src.find(hook), std::string::npos) << hook;
    // No table site: none of it.
    const std::string plain =
        generate(lower(s, spec_inputs(s), KernelKind::backward_dq, {"slopes"}), make_config(s, KernelKind::backward_dq, "sm_80"),
                 "sm_80")
            .source;
    EXPECT_EQ(plain.find("kInputGradTableOutput"), std::string::npos);
    EXPECT_EQ(plain.find("grad_table_"), std::string::npos);
}

// Gathered reads with one varying index are table sites too: the index that reads a tensor
// (doc[kv_idx]) or several coordinates (q_idx + kv_idx) is the table dimension; the head
// index beside it is fixed per CTA.
TEST(InputGrads, GatheredReadWithOneVaryingIndexIsATableSite) {
    const Tensor seg_bias("seg_bias", DType::f32, 2), seg("seg", DType::i32, 1), t("t", DType::f32, 2);
    const struct {
        AttentionSpec spec;
        std::string name;
        int dim;
    } cases[] = {{with_mod(score() + seg_bias(head(), seg(kv_idx()))), "seg_bias", 1},
                 {with_mod(score() + t(q_idx() + kv_idx(), head())), "t", 0},
                 {with_mod(score() * t(kv_head(), kv_idx() % 8)), "t", 1}};
    for (const auto& c : cases) {
        const InputGradPlan p = plan_input_grads(c.spec, {c.name});
        ASSERT_EQ(p.sites.size(), 1u) << c.name;
        EXPECT_TRUE(p.sites[0].table) << c.name;
        EXPECT_FALSE(p.sites[0].store);
        EXPECT_EQ(p.sites[0].table_dim, c.dim) << c.name;
        EXPECT_EQ(p.sites[0].accum, -1);
        const KernelPlan plan = lower(c.spec, spec_inputs(c.spec), KernelKind::backward_dq, {c.name});
        EXPECT_EQ(plan.grad_table_output(), 0);
    }
}

TEST(InputGrads, UnsupportedReadsAreUserErrors) {
    const Tensor table("table", DType::f32, 2), kvb("kv_bias", DType::f32, 2), bias("bias", DType::f32, 4),
        doc("doc", DType::i32, 2);
    // Table reads: one per backward, each tensor read once, one varying index.
    const Tensor table2("table2", DType::f32, 1);
    EXPECT_USER_ERROR(plan_input_grads(with_mod(mods::relative_position_bias(table, 8) +
                                                table2(clamp(q_idx() - kv_idx(), -3, 3) + 3)),
                                       {"table", "table2"}),
                      "the gradients of two tensors read through an index that varies");
    EXPECT_USER_ERROR(plan_input_grads(with_mod(mods::relative_position_bias(table, 8) +
                                                table(head(), clamp(kv_idx() - q_idx(), -2, 2) + 2)),
                                       {"table"}),
                      "the gradient of tensor 'table' is a table read");
    EXPECT_USER_ERROR(plan_input_grads(with_mod(score() + table(kv_idx() - q_idx() + 40, q_idx() - kv_idx() + 40)),
                                       {"table"}),
                      "in more than one dimension");
    EXPECT_USER_ERROR(plan_input_grads(with_mod(score() + table(doc(batch(), kv_idx()), q_idx() + kv_idx())), {"table"}),
                      "in more than one dimension");
    EXPECT_USER_ERROR(plan_input_grads(with_mod(score() + kvb(head(), kv_idx())), {"kv_bias"}), "is a per-key read");
    EXPECT_USER_ERROR(plan_input_grads(with_mod(score() + kvb(head(), q_idx())), {"kv_bias"}), "is a per-query read");
    // A stored tensor read elsewhere too.
    EXPECT_USER_ERROR(plan_input_grads(with_mod(score() + bias(batch(), head(), q_idx(), kv_idx()) +
                                                bias(batch(), head(), kv_idx(), q_idx())),
                                       {"bias"}),
                      "the gradient of tensor 'bias' is read elementwise");
    // From autodiff: an int tensor, a name the spec does not read.
    AttentionSpec s = with_mod(score() + bias(batch(), head(), q_idx(), kv_idx())).mask(mods::document_mask(doc));
    EXPECT_USER_ERROR(plan_input_grads(s, {"doc"}), "only float tensors");
    EXPECT_USER_ERROR(plan_input_grads(s, {"nope"}), "a gradient was asked for 'nope'");
}

// A tensor only the mask reads, or a scalar score_mod does not depend on: zeros, from the
// last CTA (an output without sites).
TEST(InputGrads, OutputWithoutSitesIsZeroedByTheLastCta) {
    const Tensor w("w", DType::f32, 1);
    AttentionSpec s = with_mod(score() * 2.0).mask(w(head()) > 0.0);
    const KernelPlan plan = lower(s, spec_inputs(s), KernelKind::backward_dq, {"w"});
    ASSERT_EQ(plan.grad_outputs.size(), 1u);
    EXPECT_TRUE(plan.grad_sites.empty());
    EXPECT_EQ(plan.grad_accum_outputs(), 1);
    const std::string src = generate(plan, make_config(s, KernelKind::backward_dq, "sm_80"), "sm_80").source;
    EXPECT_NE(src.find("kInputGradAccums = 0;"), std::string::npos);
    EXPECT_NE(src.find("kInputGradOutputs = 1;"), std::string::npos);
    EXPECT_NE(src.find("attnjit::GradWork grad_work;"), std::string::npos);
}

TEST(InputGrads, EmittedHooksAndLayout) {
    for (const auto& s : testing::input_grad_specs(DType::bf16, 64)) {
        const KernelPlan plan = lower(s.spec, spec_inputs(s.spec), KernelKind::backward_dq, s.grads);
        const KernelSource k = generate(plan, make_config(s.spec, KernelKind::backward_dq, "sm_80"), "sm_80");
        for (const auto& name : s.grads) {
            EXPECT_NE(k.source.find("attnjit::GradArg<"), std::string::npos) << s.name;
            ASSERT_NE(k.layout.find(name), nullptr) << s.name << " " << name;
        }
        EXPECT_NE(k.source.find("__device__ static void input_grads("), std::string::npos) << s.name;
        const bool stored = s.grads.count("bias") > 0, summed = s.grads.size() > (stored ? 1u : 0u);
        EXPECT_EQ(k.source.find("input_grads_zero(") != std::string::npos, stored) << s.name;
        EXPECT_EQ(k.source.find("grad_site_index(") != std::string::npos, summed) << s.name;
        EXPECT_EQ(k.layout.find("grad_work") != nullptr, summed) << s.name;
        // The zero fill only where tiles may be skipped (a mask that classifies).
        if (stored)
            EXPECT_EQ(k.source.find("kInputGradZeroFill = true") != std::string::npos, plan.classify.can_classify)
                << s.name;
    }
    // The alibi partial: d t / d slopes[h] = kv_idx - q_idx, summed per CTA.
    const auto specs = testing::input_grad_specs(DType::bf16, 64);
    const KernelPlan alibi = lower(specs[2].spec, spec_inputs(specs[2].spec), KernelKind::backward_dq, specs[2].grads);
    ASSERT_EQ(alibi.grad_sites.size(), 1u);
    EXPECT_FALSE(alibi.grad_sites[0].store);
}

// A backward asked for no gradient has none of the input-gradient hooks (every spec, both
// kinds); the forward is untouched by any grads set, and so is a backward_dkdv whose
// gradients need no planes (per-CTA sums only: backward_dq does all the work).
TEST(InputGrads, NoGradientsNoChange) {
    int dkdv_without_planes = 0;
    for (const auto& s : testing::input_grad_specs(DType::bf16, 64)) {
        for (KernelKind kind : {KernelKind::backward_dq, KernelKind::backward_dkdv, KernelKind::forward}) {
            const auto c = make_config(s.spec, kind, "sm_80");
            const std::string plain = generate(s.spec, c, "sm_80").source;
            EXPECT_EQ(plain.find("Input"), std::string::npos) << s.name;
            const KernelPlan with = lower(s.spec, spec_inputs(s.spec), kind, s.grads);
            if (kind == KernelKind::forward || (kind == KernelKind::backward_dkdv && !with.grad_planes)) {
                EXPECT_EQ(generate(with, c, "sm_80").source, plain) << s.name << " " << kernel_kind_name(kind);
                dkdv_without_planes += kind == KernelKind::backward_dkdv;
            }
        }
    }
    EXPECT_GT(dkdv_without_planes, 0) << "no spec exercises a backward_dkdv without planes";
}

}  // namespace
}  // namespace attnjit::codegen
