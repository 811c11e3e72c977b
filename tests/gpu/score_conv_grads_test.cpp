// Gradients of score_mod's captured tensors and scalars with a score convolution: score_mod
// reads C (the convolved scores), and backward_dq, with the forward's convolution
// (sm80/backward_dq.cuh kConv), computes their gradients after backward_fused. Against the
// fp64 reference, with dQ, dK, dV and dtheta checked on the same run: an elementwise bias
// (written once), a pair bias [1, H, N, N] summed over the batch (the batch-sum launch),
// a per-query temperature, per-head ALiBi slopes and the softcap scalar (per-CTA sums), a
// relative-position table, with masks that gate the taps, a gate and sinks, head dims 32
// (padded) to 256, ragged lengths; both dQ orders. Gradients are poisoned before the
// launch. What it does not compute (sums over the queries of a key, sums over planes) is
// refused with a UserError before anything is launched.
//
// Tolerances: as backward_correctness_test's tensor gradients: gradient_tolerance for a
// gradient with one element per score element, summed_gradient_tolerance for sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "api/attention_backward.h"
#include "dsl/dsl.h"
#include "dsl/mods.h"
#include "reference/attention_backward.h"
#include "reference/tolerance.h"
#include "tests/common/expect_error.h"
#include "tests/gpu/score_conv_cases.h"

namespace attnjit::gputest {
namespace {

using dsl::Expr;

enum class ConvGrad {
    bias,        // score + bias[b, h, i, j] (bf16): one element per score element
    pair,        // score + pair[0, h, i, j], pair [1, H, N, N]: summed over the batch
    query_temp,  // score + score * temp[b, h, i]: per query
    slopes_cap,  // softcap(score + slopes[h] (j - i)) with cap: per head and a scalar
    table,       // score + rel[h, clamp(i - j, 0, 31)]: a table read
};

const char* grad_name(ConvGrad g) {
    switch (g) {
    case ConvGrad::bias: return "bias";
    case ConvGrad::pair: return "pair";
    case ConvGrad::query_temp: return "query_temp";
    case ConvGrad::slopes_cap: return "slopes_cap";
    case ConvGrad::table: return "table";
    }
    return "?";
}

struct ConvGradCase {
    ConvCase c;
    ConvGrad grad;
    std::string name() const { return c.name() + "_" + grad_name(grad); }
};

struct ConvGradProblem {
    dsl::AttentionSpec spec;
    reference::ForwardInputs in;
    std::set<std::string> wanted;  // captured tensors and scalars, beside theta (and gate, sinks)
    bool summed = true;            // every wanted gradient is a sum over score elements
};

ConvGradProblem make_problem(const ConvGradCase& gc) {
    const ConvCase& c = gc.c;
    ConvGradProblem p{conv_spec(c), conv_inputs(c), {}, true};
    const uint64_t seed = c.seed();
    auto add = [&](const std::string& name, HostTensor t, uint64_t s, double mean = 0.0, double sd = 1.0) {
        reference::fill_normal(t, seed + s, mean, sd);
        p.in.tensors.emplace(name, std::move(t));
        p.wanted.insert(name);
    };
    using dsl::batch;
    using dsl::head;
    using dsl::kv_idx;
    using dsl::q_idx;
    using dsl::score;
    switch (gc.grad) {
    case ConvGrad::bias:
        add("bias", HostTensor(c.dtype, {c.batch, c.hq, c.nq, c.nk}), 51);
        p.spec.score_mod(score() + dsl::Tensor("bias", c.dtype, 4)(batch(), head(), q_idx(), kv_idx()));
        p.summed = false;
        break;
    case ConvGrad::pair:
        add("pair", HostTensor(c.dtype, {1, c.hq, c.nq, c.nk}), 52);
        p.spec.score_mod(score() + dsl::Tensor("pair", c.dtype, 4)(Expr(0), head(), q_idx(), kv_idx()));
        break;
    case ConvGrad::query_temp:
        add("temp", HostTensor(DType::f32, {c.batch, c.hq, c.nq}), 53, 0.0, 0.5);
        p.spec.score_mod(score() + score() * dsl::Tensor("temp", DType::f32, 3)(batch(), head(), q_idx()));
        break;
    case ConvGrad::slopes_cap:
        add("slopes", HostTensor(DType::f32, {c.hq}), 54, 0.0, 0.05);
        p.in.scalars["cap"] = 3.0;
        p.wanted.insert("cap");
        p.spec.score_mod(dsl::mods::compose(
            dsl::mods::softcap(dsl::scalar("cap")),
            score() + dsl::Tensor("slopes", DType::f32, 1)(head()) * (kv_idx() - q_idx())));
        break;
    case ConvGrad::table:
        add("rel", HostTensor(DType::f32, {c.hq, 32}), 55);
        p.spec.score_mod(score() + dsl::Tensor("rel", DType::f32, 2)(head(), dsl::clamp(q_idx() - kv_idx(), 0, 31)));
        break;
    }
    return p;
}

HostTensor like(const HostTensor& t) { return HostTensor(t.dtype(), t.shape()); }

// attnjit's forward and backward of the problem (every gradient poisoned first); the checks.
std::vector<Check> run_and_check(const ConvGradCase& gc, const ConvGradProblem& p, const reference::BackwardResult& ref,
                                 const HostTensor& d_o, bool deterministic) {
    const ConvCase& c = gc.c;
    const auto& qs = p.in.q.shape();
    HostTensor o(c.dtype, {qs[0], qs[1], qs[2], c.dv()}), lse(DType::f32, {qs[0], qs[1], qs[2]});
    reference::fill_poison(o);
    reference::fill_poison(lse);
    const ConvDeviceArgs d = to_device_args(p.in, o, lse);
    Attention(p.spec)(d.args);

    std::set<std::string> grads = p.wanted;
    grads.insert("theta");
    if (c.gate) grads.insert("gate");
    if (c.sinks) grads.insert("sinks");
    std::map<std::string, HostTensor> host;
    std::map<std::string, runtime::DeviceTensor> dev;
    for (const std::string& name : grads) {
        auto t = p.in.tensors.find(name);
        HostTensor h = t != p.in.tensors.end() ? like(t->second) : HostTensor(DType::f32, {});
        reference::fill_poison(h);
        dev.emplace(name, runtime::to_device(h));
        host.emplace(name, std::move(h));
    }
    HostTensor dq = like(p.in.q), dk = like(p.in.k), dv = like(p.in.v);
    for (HostTensor* t : {&dq, &dk, &dv}) reference::fill_poison(*t);
    auto dev_do = runtime::to_device(d_o), dev_dq = runtime::to_device(dq), dev_dk = runtime::to_device(dk),
         dev_dv = runtime::to_device(dv);
    GradArgs ga{dev_do.view, dev_dq.view, dev_dk.view, dev_dv.view};
    for (const auto& [name, t] : dev) ga.grads[name] = t.view;
    CompileOptions opts;
    opts.grads = grads;
    opts.deterministic = deterministic;
    AttentionBackward(p.spec, opts)(d.args, ga);
    runtime::synchronize("cuCtxSynchronize after the score convolution backward with captured gradients");
    runtime::from_device(dev_dq, dq);
    runtime::from_device(dev_dk, dk);
    runtime::from_device(dev_dv, dv);
    for (auto& [name, h] : host) runtime::from_device(dev.at(name), h);

    const std::string name = gc.name() + (deterministic ? "" : " (fast)");
    const DType dt = c.dtype;
    std::vector<Check> checks;
    for (auto [what, actual, expected] : {std::tuple{"dQ", &dq, &ref.dq}, {"dK", &dk, &ref.dk}, {"dV", &dv, &ref.dv}})
        checks.push_back(check_output(name + " " + what, *actual, *expected,
                                      reference::gradient_tolerance(dt, max_abs(*expected))));
    for (const auto& [gname, h] : host) {
        const bool one = (gname == "gate") || (!p.summed && p.wanted.count(gname));
        const double t = one ? reference::gradient_tolerance(dt) : reference::summed_gradient_tolerance(dt);
        if (h.shape().empty()) {  // a runtime scalar
            const double a = h.get(static_cast<const int64_t*>(nullptr)), e = ref.dscalars.at(gname);
            std::printf("%s: d%s = %.8g, reference %.8g\n", name.c_str(), gname.c_str(), a, e);
            checks.push_back({std::fabs(a - e) <= 2 * t * std::max(std::fabs(e), 1e-6),
                              name + " d" + gname + " = " + std::to_string(a) + ", reference " + std::to_string(e)});
            continue;
        }
        const reference::DoubleTensor& e = ref.dtensors.at(gname);
        const double g_max = max_abs(e);
        std::printf("%s: d%s max error / max |gradient| %.2e (tolerance %.0e)\n", name.c_str(), gname.c_str(),
                    reference::max_abs_error(reference::to_double(h), e) / std::max(g_max, 1e-30), t);
        checks.push_back(check_output(name + " d" + gname, h, e, reference::Tolerance{t * std::max(g_max, 1e-6), t}));
    }
    return checks;
}

std::vector<ConvGradCase> conv_grad_cases() {
    std::vector<ConvGradCase> cases;
    auto add = [&](ConvCase c, ConvGrad g) { cases.push_back({c, g}); };
    add({DType::bf16, 64, 6, 11, 2, 4, 2, 300, 300}, ConvGrad::bias);  // ragged, GQA
    add({DType::f16, 128, 3, 3, 3, 2, 2, 200, 200}, ConvGrad::pair);   // the batch-sum launch
    add({DType::bf16, 32, 8, 15, 5, 2, 1, 130, 130}, ConvGrad::pair);  // padded head dim 32 -> 64
    ConvCase docs{DType::bf16, 64, 8, 15, 2, 2, 1, 333, 333};
    docs.mask = ConvMask::document;  // the mask gates the taps
    add(docs, ConvGrad::query_temp);
    ConvCase window{DType::bf16, 32, 6, 11, 1, 4, 4, 250, 250};
    window.mask = ConvMask::window;
    add(window, ConvGrad::slopes_cap);
    add({DType::f16, 64, 1, 1, 1, 2, 2, 150, 150}, ConvGrad::table);     // the 1 x 1 kernel
    add({DType::bf16, 128, 6, 11, 1, 2, 2, 100, 300}, ConvGrad::table);  // Nq < Nk
    add({DType::bf16, 256, 6, 11, 1, 2, 2, 200, 200}, ConvGrad::bias);   // d256: the 32 x 64 tile, 2 warps
    ConvCase gated{DType::bf16, 128, 6, 11, 2, 4, 2, 300, 300};
    gated.gate = gated.sinks = true;
    gated.mask = ConvMask::scatter;
    add(gated, ConvGrad::bias);
    return cases;
}

class ScoreConvGrads : public ::testing::TestWithParam<ConvGradCase> {};

TEST_P(ScoreConvGrads, MatchesReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    const ConvGradCase& gc = GetParam();
    const ConvGradProblem p = make_problem(gc);
    HostTensor d_o(gc.c.dtype, {gc.c.batch, gc.c.hq, gc.c.nq, gc.c.dv()});
    reference::fill_normal(d_o, gc.c.seed() + 17);
    std::set<std::string> wanted = p.wanted;
    wanted.insert("theta");
    if (gc.c.gate) wanted.insert("gate");
    if (gc.c.sinks) wanted.insert("sinks");
    const reference::BackwardResult ref = reference::backward(p.spec, p.in, d_o, wanted);
    for (bool deterministic : {true, false})
        for (const Check& ch : run_and_check(gc, p, ref, d_o, deterministic)) EXPECT_TRUE(ch.ok) << ch.message;
}

INSTANTIATE_TEST_SUITE_P(Matrix, ScoreConvGrads, ::testing::ValuesIn(conv_grad_cases()),
                         [](const ::testing::TestParamInfo<ConvGradCase>& info) { return info.param.name(); });

// Sums over the queries of a key (backward_dkdv's sites) are refused when the backward is
// built; sums over planes (a tensor broadcast over the heads) when it is launched, before
// anything runs.
TEST(ScoreConvGrads, UnsupportedSumsAreRefused) {
    const ConvCase c{DType::bf16, 64, 3, 3, 2, 2, 2, 100, 100};
    CompileOptions opts;
    opts.arch = "sm_90a";  // compile only
    opts.grads = {"kb"};
    dsl::AttentionSpec per_key = conv_spec(c);
    per_key.score_mod(dsl::score() + dsl::Tensor("kb", DType::f32, 2)(dsl::head(), dsl::kv_idx()));
    EXPECT_USER_ERROR(AttentionBackward(per_key, opts), "sums its reads over the queries of each key");

    ATTNJIT_SKIP_WITHOUT_GPU();
    dsl::AttentionSpec planes = conv_spec(c);
    planes.score_mod(dsl::score() +
                     dsl::Tensor("hb", DType::f32, 4)(dsl::batch(), Expr(0), dsl::q_idx(), dsl::kv_idx()));
    reference::ForwardInputs in = conv_inputs(c);
    HostTensor hb(DType::f32, {c.batch, 1, c.nq, c.nk});
    reference::fill_normal(hb, 5);
    in.tensors.emplace("hb", hb);
    HostTensor o(c.dtype, {c.batch, c.hq, c.nq, c.d}), lse(DType::f32, {c.batch, c.hq, c.nq});
    const ConvDeviceArgs d = to_device_args(in, o, lse);
    const Attention forward(planes);
    forward(d.args);
    HostTensor d_o = like(in.q), dhb(DType::f32, {c.batch, 1, c.nq, c.nk});
    reference::fill_normal(d_o, 6);
    reference::fill_poison(dhb);
    auto dev_do = runtime::to_device(d_o), dev_dq = runtime::to_device(like(in.q)),
         dev_dk = runtime::to_device(like(in.k)), dev_dv = runtime::to_device(like(in.v)),
         dev_dhb = runtime::to_device(dhb);
    GradArgs ga{dev_do.view, dev_dq.view, dev_dk.view, dev_dv.view};
    ga.grads["hb"] = dev_dhb.view;
    CompileOptions on_gpu;
    on_gpu.grads = {"hb"};
    const AttentionBackward backward(planes, on_gpu);
    EXPECT_USER_ERROR(backward(d.args, ga), "which the backward of a score convolution computes only");
    runtime::synchronize("cuCtxSynchronize after the refused launch");
    HostTensor after = like(dhb);
    runtime::from_device(dev_dhb, after);
    EXPECT_EQ(after.storage(), dhb.storage()) << "a refused backward wrote its gradient";
}

}  // namespace
}  // namespace attnjit::gputest
