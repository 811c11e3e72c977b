// api::plan_grad_planes (api/grad_planes.h): whether the gradient of a site written once per
// element (elementwise; the row sums of per-query and per-key reads) is stored directly or
// through planes, and over which coordinates, from the read's roles and the gradient's
// shape and strides.
#include <gtest/gtest.h>

#include "api/grad_planes.h"
#include "codegen/input_grads.h"
#include "common/expect_error.h"
#include "dsl/dsl.h"

namespace attnjit::api {
namespace {

using namespace dsl;

constexpr int64_t B = 2, Hq = 4, Hkv = 2, Nq = 100, Nk = 300;

LaunchArgs shapes(int64_t hkv = Hkv) {
    LaunchArgs a;
    a.q = TensorView{nullptr, DType::bf16, {B, Hq, Nq, 64}, {Hq * Nq * 64, Nq * 64, 64, 1}};
    a.k = TensorView{nullptr, DType::bf16, {B, hkv, Nk, 64}, {hkv * Nk * 64, Nk * 64, 64, 1}};
    return a;
}

// The one site of `name` in score_mod `mod`.
codegen::InputGradSite site_of(const Expr& mod, const std::string& name) {
    const AttentionSpec spec = AttentionSpec().dtype(DType::bf16).head_dim(64).return_lse().score_mod(mod);
    const codegen::InputGradPlan p = codegen::plan_input_grads(spec, {name});
    EXPECT_EQ(p.sites.size(), 1u);
    return p.sites.at(0);
}

TensorView dense(std::vector<int64_t> shape) {
    TensorView t{nullptr, DType::f32, shape, {}};
    t.strides = TensorView::contiguous_strides(shape);
    return t;
}

struct Want {
    long long elems;  // 0: direct
    int plane_b, plane_h;
};

void expect(const GradPlanes& pl, Want w, const std::string& what) {
    EXPECT_EQ(pl.elems, w.elems) << what;
    EXPECT_EQ(pl.plane_b, w.plane_b) << what;
    EXPECT_EQ(pl.plane_h, w.plane_h) << what;
}

TEST(GradPlanes, PerQueryReads) {
    const Tensor qb("q_bias", DType::f32, 3), qh("qh_bias", DType::f32, 2), q1("q1", DType::f32, 1);
    const LaunchArgs a = shapes();
    // q_bias[b, h, q_idx] of [B, Hq, Nq]: every element one row's sum: direct.
    expect(plan_grad_planes(site_of(score() + qb(batch(), head(), q_idx()), "q_bias"), dense({B, Hq, Nq}), a, "q"),
           {0, 0, 0}, "q_bias[b, h, q_idx]");
    // Longer than Nq (elements no row reads): planes, so that the sum writes every element.
    expect(plan_grad_planes(site_of(score() + qb(batch(), head(), q_idx()), "q_bias"), dense({B, Hq, Nq + 5}), a,
                            "q"),
           {B * Hq * (Nq + 5), 0, 0}, "q_bias longer than Nq");
    // Broadcast over the batch (stride 0): planes over the batch.
    TensorView bcast = dense({1, Hq, Nq});
    bcast.strides[0] = 0;
    expect(plan_grad_planes(site_of(score() + qb(batch(), head(), q_idx()), "q_bias"), bcast, a, "q"),
           {Hq * Nq, 1, 0}, "q_bias broadcast over b");
    // qh_bias[h, q_idx]: summed over the batch.
    expect(plan_grad_planes(site_of(score() + qh(head(), q_idx()), "qh_bias"), dense({Hq, Nq}), a, "qh"),
           {Hq * Nq, 1, 0}, "qh_bias[h, q_idx]");
    // q1[q_idx + 1]: over batch and heads, and not bare.
    expect(plan_grad_planes(site_of(score() + q1(q_idx() + 1), "q1"), dense({Nq + 1}), a, "q1"), {Nq + 1, 1, 1},
           "q1[q_idx + 1]");
}

TEST(GradPlanes, PerKeyReads) {
    const Tensor kb("kv_bias", DType::f32, 2), k1("k_bias", DType::f32, 1), kbh("kbh", DType::f32, 3);
    const LaunchArgs a = shapes();
    // kv_bias[h, kv_idx]: every (h, j) written once per batch row: planes over the batch.
    expect(plan_grad_planes(site_of(score() + kb(head(), kv_idx()), "kv_bias"), dense({Hq, Nk}), a, "kv"),
           {Hq * Nk, 1, 0}, "kv_bias[h, kv_idx]");
    // kbh[b, h, kv_idx]: direct.
    expect(plan_grad_planes(site_of(score() + kbh(batch(), head(), kv_idx()), "kbh"), dense({B, Hq, Nk}), a, "kbh"),
           {0, 0, 0}, "kbh[b, h, kv_idx]");
    // k_bias[kv_idx]: over batch and heads.
    expect(plan_grad_planes(site_of(score() + k1(kv_idx()), "k_bias"), dense({Nk}), a, "k"), {Nk, 1, 1},
           "k_bias[kv_idx]");
    // kv_bias[kv_head, kv_idx] with GQA: the group's query heads add up (planes over h);
    // without GQA kv_head is the query head.
    const codegen::InputGradSite kvh = site_of(score() + kb(kv_head(), kv_idx()), "kv_bias");
    expect(plan_grad_planes(kvh, dense({Hkv, Nk}), a, "kvh"), {Hkv * Nk, 1, 1}, "kv_bias[kv_head, kv_idx] GQA");
    const LaunchArgs mha = shapes(Hq);
    expect(plan_grad_planes(kvh, dense({Hq, Nk}), mha, "kvh"), {Hq * Nk, 1, 0}, "kv_bias[kv_head, kv_idx] MHA");
    // B = 1, Hq = Hkv: direct.
    LaunchArgs one = shapes(Hq);
    one.q.shape[0] = one.k.shape[0] = 1;
    expect(plan_grad_planes(kvh, dense({Hq, Nk}), one, "kvh"), {0, 0, 0}, "kv_bias[kv_head, kv_idx] B 1 MHA");
    // Broadcast along kv_idx: a sum over keys, refused.
    TensorView along = dense({Hq, Nk});
    along.strides[1] = 0;
    EXPECT_USER_ERROR(plan_grad_planes(site_of(score() + kb(head(), kv_idx()), "kv_bias"), along, a, "kv_bias"),
                      "captured tensor 'kv_bias' broadcasts (stride 0) in dimension 1");
}

// batch_sum_fits: which sites summed over the batch backward_dq's batch-sum launch takes
// instead of planes (only an element that no b and no other head shares).
TEST(GradPlanes, BatchSumFits) {
    const Tensor bias("bias", DType::bf16, 4), bias3("bias3", DType::f32, 3);
    const LaunchArgs a = shapes();
    auto fits = [&](const Expr& mod, const std::string& name, const TensorView& t) {
        const codegen::InputGradSite site = site_of(mod, name);
        return batch_sum_fits(site, t, plan_grad_planes(site, t, a, name));
    };
    TensorView broadcast = dense({1, Hq, Nq, Nk});  // AlphaFold's pair bias, stride 0 over b
    broadcast.strides[0] = 0;
    const Expr full = score() + bias(batch(), head(), q_idx(), kv_idx());
    EXPECT_TRUE(fits(full, "bias", broadcast));
    EXPECT_TRUE(fits(score() + bias(0, head(), q_idx(), kv_idx()), "bias", dense({1, Hq, Nq, Nk})));
    EXPECT_TRUE(fits(score() + bias3(head(), q_idx(), kv_idx()), "bias3", dense({Hq, Nq, Nk})));
    // Stored directly (one element per (b, h, i, j)): nothing to sum.
    EXPECT_FALSE(fits(full, "bias", dense({B, Hq, Nq, Nk})));
    // Summed over the heads too (planes over b and h): two CTAs would share an element.
    TensorView no_head = dense({1, 1, Nq, Nk});
    no_head.strides[0] = no_head.strides[1] = 0;
    EXPECT_FALSE(fits(full, "bias", no_head));
    // Per kv head with GQA (Hq 4, Hkv 2): the query heads of a group share an element.
    EXPECT_FALSE(fits(score() + bias3(kv_head(), q_idx(), kv_idx()), "bias3", dense({Hkv, Nq, Nk})));
}

// backward_dq's batch-sum launch (api/backward_launch.h): no chunks once the tiles fill the
// GPU, else about 768 CTAs, at least 8 batches a chunk, at most 256 MiB of partials.
TEST(BatchSumChunks, FromTheShapeOnly) {
    EXPECT_EQ(batch_sum_chunks(1152, 128, 8 * 768 * 768), 1);  // msa_row S128 N768: 12 x 12 x 8 tiles
    EXPECT_EQ(batch_sum_chunks(128, 128, 8 * 256 * 256), 6);   // msa_row S128 N256: 4 x 4 x 8
    EXPECT_EQ(batch_sum_chunks(128, 20, 8 * 256 * 256), 2);    // 20 batches: 2 of 10
    EXPECT_EQ(batch_sum_chunks(128, 7, 8 * 256 * 256), 1);     // fewer than 16 batches: one chunk
    EXPECT_EQ(batch_sum_chunks(1, 1 << 20, int64_t{1} << 24), 4);  // 64 MiB a chunk
    EXPECT_EQ(batch_sum_chunks(1, 1 << 20, int64_t{1} << 30), 1);
}

}  // namespace
}  // namespace attnjit::api
