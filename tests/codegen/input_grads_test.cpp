// input_grads (codegen/input_grads.h): which gradients of captured tensors and scalars a
// backward_dq plan computes and how (stored elementwise, summed per CTA, per query row; per
// key in backward_dkdv), the UserErrors for
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
    // Per-key and per-query reads: one read per tensor.
    EXPECT_USER_ERROR(plan_input_grads(with_mod(score() + kvb(head(), kv_idx()) + kvb(head(), kv_idx() + 1)),
                                       {"kv_bias"}),
                      "the gradient of tensor 'kv_bias' is read per key at");
    EXPECT_USER_ERROR(plan_input_grads(with_mod(score() * kvb(head(), q_idx()) + kvb(head(), kv_idx())), {"kv_bias"}),
                      "read 'kv_bias' at one place in score_mod");
    EXPECT_USER_ERROR(plan_input_grads(with_mod(score() + kvb(head(), q_idx()) + kvb(0, q_idx())), {"kv_bias"}),
                      "the gradient of tensor 'kv_bias' is read per query at");
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

// Per-query reads are summed per row in backward_dq, per-key reads per key in
// backward_dkdv: both stored once per (b, h, row) like an elementwise site (the launch picks
// direct stores or planes from the roles), outside the per-CTA slots.
TEST(InputGrads, PerQueryAndPerKeyPlans) {
    const Tensor qb("q_bias", DType::f32, 3), kvb("kv_bias", DType::f16, 2), slopes("slopes", DType::f32, 1);
    const AttentionSpec s =
        with_mod(score() + qb(batch(), head(), q_idx()) + kvb(kv_head(), kv_idx() + 1) + slopes(head()));
    const std::set<std::string> grads{"q_bias", "kv_bias", "slopes"};
    const InputGradPlan p = plan_input_grads(s, grads);
    ASSERT_EQ(p.sites.size(), 3u);
    ASSERT_EQ(p.outputs.size(), 3u);
    EXPECT_EQ(p.outputs[0].name, "slopes");  // per-CTA outputs first
    using Role = InputGradSite::Role;
    for (const auto& site : p.sites) {
        const InputGradOutput& o = p.outputs[static_cast<size_t>(site.output)];
        if (o.name == "q_bias") {
            EXPECT_TRUE(site.per_query);
            EXPECT_FALSE(site.per_key || site.store || site.table);
            EXPECT_EQ(site.row_site, 0);
            EXPECT_EQ(site.accum, -1);
            EXPECT_TRUE(o.stored);
            EXPECT_FALSE(o.per_key);
            EXPECT_EQ(site.roles, (std::vector<Role>{Role::Batch, Role::Head, Role::Q}));
            EXPECT_EQ(site.bare, (std::vector<bool>{true, true, true}));
        } else if (o.name == "kv_bias") {
            EXPECT_TRUE(site.per_key);
            EXPECT_FALSE(site.per_query || site.store);
            EXPECT_EQ(site.row_site, 0);
            EXPECT_TRUE(o.stored);
            EXPECT_TRUE(o.per_key);
            EXPECT_EQ(o.dtype, DType::f16);
            EXPECT_EQ(site.roles, (std::vector<Role>{Role::KvHead, Role::K}));
            EXPECT_EQ(site.bare, (std::vector<bool>{true, false})) << "kv_idx + 1 is not bare: planes";
        } else {
            EXPECT_EQ(site.accum, 0) << "the per-CTA slots skip per-query and per-key sites";
        }
    }

    // backward_dq: the per-query site (and the per-CTA one), not the per-key site.
    const KernelPlan dq = lower(s, spec_inputs(s), KernelKind::backward_dq, grads);
    EXPECT_EQ(dq.grad_outputs.size(), 3u);
    EXPECT_EQ(dq.grad_sites.size(), 2u);
    EXPECT_EQ(dq.grad_query_sites(), 1);
    EXPECT_EQ(dq.grad_key_sites(), 0);
    EXPECT_EQ(dq.grad_accums(), 1);
    EXPECT_FALSE(dq.grad_stores()) << "no zero fill: a row's sum is stored even when every tile is skipped";
    const KernelSource dqk = generate(dq, make_config(s, KernelKind::backward_dq, "sm_80"), "sm_80");
    EXPECT_NE(dqk.source.find("kInputGradQuerySites = 1;"), std::string::npos);
    EXPECT_NE(dqk.source.find("acc.row_add(0, dt * ("), std::string::npos);
    EXPECT_NE(dqk.source.find("__device__ static void input_grads_query_store("), std::string::npos);
    EXPECT_EQ(dqk.source.find("input_grads_key"), std::string::npos);
    EXPECT_EQ(dqk.source.find("input_grads_zero("), std::string::npos);

    // backward_dkdv: the per-key site, its store, the last CTA's plane sums (loads past
    // L1), and GradWork for the ticket; the plane sums at its start skip the per-key output.
    const KernelPlan dkdv = lower(s, spec_inputs(s), KernelKind::backward_dkdv, grads);
    EXPECT_TRUE(dkdv.grad_planes);
    ASSERT_EQ(dkdv.grad_sites.size(), 1u);
    EXPECT_TRUE(dkdv.grad_sites[0].per_key);
    EXPECT_EQ(dkdv.grad_key_sites(), 1);
    const KernelSource kk = generate(dkdv, make_config(s, KernelKind::backward_dkdv, "sm_80"), "sm_80");
    EXPECT_NE(kk.source.find("kInputGradKeySites = 1;"), std::string::npos);
    EXPECT_NE(kk.source.find("__device__ static void input_grads_key(const Params& p"), std::string::npos);
    EXPECT_NE(kk.source.find("__device__ static void input_grads_key_store("), std::string::npos);
    const size_t finish = kk.source.find("finish_key_grad_planes(");
    ASSERT_NE(finish, std::string::npos);
    EXPECT_NE(kk.source.find("__ldcg(p.grad_kv_bias.planes", finish), std::string::npos);
    const size_t start = kk.source.find("finish_input_grad_planes("), end = kk.source.find("input_grads_key(");
    ASSERT_LT(start, end);
    EXPECT_EQ(kk.source.substr(start, end - start).find("grad_kv_bias"), std::string::npos)
        << "the per-key planes are summed at the end, by the last CTA";
    EXPECT_NE(kk.source.substr(start, end - start).find("grad_q_bias"), std::string::npos);
    EXPECT_NE(kk.layout.find("grad_work"), nullptr);
    EXPECT_EQ(kk.source.find("kInputGrads = true"), std::string::npos);

    // Only a per-query gradient: backward_dkdv sums its planes and has no per-key hooks.
    const KernelPlan dkdv_q = lower(s, spec_inputs(s), KernelKind::backward_dkdv, {"q_bias"});
    EXPECT_TRUE(dkdv_q.grad_planes);
    EXPECT_TRUE(dkdv_q.grad_sites.empty());
    const KernelSource kq = generate(dkdv_q, make_config(s, KernelKind::backward_dkdv, "sm_80"), "sm_80");
    EXPECT_EQ(kq.source.find("input_grads_key"), std::string::npos);
    EXPECT_EQ(kq.source.find("kInputGradKeySites"), std::string::npos);
    EXPECT_EQ(kq.layout.find("grad_work"), nullptr);
    // Only a per-key gradient: backward_dq has the output (its Params) and no site.
    const KernelPlan dq_k = lower(s, spec_inputs(s), KernelKind::backward_dq, {"kv_bias"});
    EXPECT_EQ(dq_k.grad_outputs.size(), 1u);
    EXPECT_TRUE(dq_k.grad_sites.empty());
    EXPECT_EQ(dq_k.grad_accum_outputs(), 0);
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
        size_t row_grads = 0;
        for (const auto& g : s.grads) row_grads += testing::stored_grad(g) && g != "bias" ? 1 : 0;
        const bool stored = s.grads.count("bias") > 0, summed = s.grads.size() > (stored ? 1u : 0u) + row_grads;
        EXPECT_EQ(k.source.find("input_grads_zero(") != std::string::npos, stored) << s.name;
        EXPECT_EQ(k.source.find("grad_site_index(") != std::string::npos, summed) << s.name;
        EXPECT_EQ(k.layout.find("grad_work") != nullptr, summed) << s.name;
        // The batch-sum launch's hooks only where the one site is the elementwise bias.
        const bool batch_sum = stored && s.grads.size() == 1;
        EXPECT_EQ(plan.grad_batch_sum(), batch_sum) << s.name;
        EXPECT_EQ(k.source.find("kInputGradBatchSum = true") != std::string::npos, batch_sum) << s.name;
        EXPECT_EQ(k.source.find("input_grads_batch_store(") != std::string::npos, batch_sum) << s.name;
        EXPECT_EQ(k.source.find("input_grad_batch_value(") != std::string::npos, batch_sum) << s.name;
        // The zero fill only where tiles may be skipped (a mask that classifies).
        if (stored) {
            EXPECT_EQ(k.source.find("kInputGradZeroFill = true") != std::string::npos, plan.classify.can_classify)
                << s.name;
        }
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
