// The output gate of the fp64 reference (reference/gate.h): a gate broadcast by stride 0
// (extent 1: its gradient sums the batch; full extent: one gradient per logical element),
// a score_mod that reads the gate tensor too, and the shape errors.
#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "dsl/dsl.h"
#include "finite_differences.h"
#include "reference/attention_backward.h"

namespace attnjit::reference {
namespace {

using namespace attnjit::dsl;
using namespace attnjit::reference::fd;

constexpr int64_t B = 3, H = 2, N = 4, D = 3;

// The gate [B, H, N, D] as a contiguous tensor holding what `g` reads at each element.
HostTensor expanded(const HostTensor& g) {
    HostTensor e(DType::f32, {B, H, N, D});
    e.for_each_index([&](const int64_t* idx) {
        const int64_t at[4] = {g.size(0) == 1 ? 0 : idx[0], idx[1], idx[2], idx[3]};
        e.set(idx, g.get(at));
    });
    return e;
}

Problem gated(const HostTensor& gate) {
    Problem p = make(B, H, H, N, N, D, D, 201);
    p.spec.gate("g").mask(kv_idx() <= q_idx() + 1);
    p.in.tensors.emplace("g", gate);
    p.wanted = {"g"};
    return p;
}

// The backward with a strided gate `g` (a) and with the same values materialised (e).
struct StridedAndMaterialised {
    Problem p;
    BackwardResult a, e;
};
StridedAndMaterialised run_both(const HostTensor& g) {
    Problem p = gated(g);
    Problem full = gated(expanded(g));
    BackwardResult a = backward(p.spec, p.in, p.d_o, p.wanted);
    BackwardResult e = backward(full.spec, full.in, full.d_o, full.wanted);
    EXPECT_EQ(a.forward.o.data, e.forward.o.data);
    return {std::move(p), std::move(a), std::move(e)};
}

// [1, H, N, D] with stride 0 over the batch: every batch row reads one gate, whose
// gradient is the sum of the rows' (finite differences move the shared element).
TEST(GateReference, BroadcastOverTheBatchSumsItsGradient) {
    HostTensor g(DType::f32, {1, H, N, D}, {0, N * D, D, 1});
    fill_normal(g, 202, 0.0, 2.0);
    auto [p, a, e] = run_both(g);
    EXPECT_EQ(a.dq.data, e.dq.data);
    const DoubleTensor& dg = a.dtensors.at("g");
    ASSERT_EQ(dg.shape, (std::vector<int64_t>{1, H, N, D}));
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < N; ++i)
            for (int64_t d = 0; d < D; ++d) {
                double sum = 0;
                for (int64_t b = 0; b < B; ++b) sum += e.dtensors.at("g").at({b, h, i, d});
                EXPECT_NEAR(dg.at({0, h, i, d}), sum, 1e-12 * (1 + std::fabs(sum)));
            }
    check(p);
}

// [B, H, N, D] with stride 0 over the batch: B logical elements share storage; the
// gradient is per logical element, as for any captured tensor (a framework's expand sums it).
TEST(GateReference, FullExtentStrideZeroIsPerElement) {
    HostTensor g(DType::f32, {B, H, N, D}, {0, N * D, D, 1});
    fill_normal(g, 203, 0.0, 2.0);
    const auto [p, a, e] = run_both(g);
    EXPECT_EQ(a.dtensors.at("g").data, e.dtensors.at("g").data);
}

// score + g[b, h, i, 0]: the gate tensor is also a captured tensor of score_mod; its two
// gradient terms add (the backward's ungated forward still reads it).
TEST(GateReference, ScoreModMayReadTheGateTensor) {
    HostTensor g(DType::f32, {B, H, N, D});
    fill_normal(g, 204, 0.0, 1.0);
    Problem p = gated(g);
    const Tensor gt("g", DType::f32, 4);
    p.spec.score_mod(score() + gt(batch(), head(), q_idx(), 0));
    check(p);
}

TEST(GateReference, ShapeErrorsNameTheGate) {
    // Extent 1 without stride 0 is not a broadcast.
    Problem p = gated(HostTensor(DType::f32, {1, H, N, D}));
    EXPECT_USER_ERROR(forward(p.spec, p.in),
                      "the gate tensor 'g' is f32[1, 2, 4, 3] strides [24, 12, 3, 1]; it must be shaped like the "
                      "output, [B, Hq, Nq, Dv] = [3, 2, 4, 3] (a dimension of extent 1 and stride 0 broadcasts)");
    EXPECT_USER_ERROR(backward(p.spec, p.in, p.d_o, p.wanted), "reference::backward: the gate tensor 'g' is");
    Problem rank = gated(HostTensor(DType::f32, {B, H, N}));
    EXPECT_USER_ERROR(forward(rank.spec, rank.in), "the spec reads a f32 tensor of rank 4");
    Problem dtype = gated(HostTensor(DType::bf16, {B, H, N, D}));
    EXPECT_USER_ERROR(forward(dtype.spec, dtype.in), "the spec reads a f32 tensor of rank 4");
}

}  // namespace
}  // namespace attnjit::reference
