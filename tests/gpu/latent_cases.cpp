#include "tests/gpu/latent_cases.h"

#include <cmath>
#include <sstream>

#include "dsl/dsl.h"
#include "dsl/mods.h"

namespace attnjit::gputest {

dsl::AttentionSpec latent_spec(const LatentCase& c) {
    dsl::AttentionSpec s;
    s.dtype(c.dtype).head_dims(c.d, c.dv).return_lse().latent(c.l, "w_qlat", "w_vup");
    dsl::Expr mask;
    if (c.causal) mask = dsl::mods::causal();
    if (c.window) {
        const dsl::Expr w = dsl::q_idx() - dsl::kv_idx() < dsl::Expr(100);
        mask = mask.defined() ? (mask && w) : w;
    }
    if (mask.defined()) s.mask(mask);
    if (c.softcap) s.score_mod(dsl::mods::softcap(dsl::scalar("cap")));
    if (c.gate) s.gate("gate");
    if (c.sinks) s.sinks("sinks");
    if (c.band >= 0) s.reciprocal_band(c.band, "alpha", c.causal);
    return s;
}

reference::ForwardInputs latent_inputs(const LatentCase& c) {
    const uint64_t seed = c.seed();
    reference::ForwardInputs in{HostTensor(c.dtype, {c.batch, c.hq, c.nq, c.d}),
                                HostTensor(c.dtype, {c.batch, 1, c.nk, c.l}),
                                HostTensor(c.dtype, {c.batch, 1, c.nk, c.l}), {}, {}};
    reference::fill_normal(in.q, seed + 1);
    reference::fill_normal(in.k, seed + 2);
    reference::fill_normal(in.v, seed + 3);
    HostTensor wq(c.dtype, {c.hq, c.d, c.l}), wv(c.dtype, {c.hq, c.l, c.dv});
    reference::fill_normal(wq, seed + 4, 0.0, 1.0 / std::sqrt(double(c.d)));
    reference::fill_normal(wv, seed + 5, 0.0, 1.0 / std::sqrt(double(c.l)));
    in.tensors.emplace("w_qlat", std::move(wq));
    in.tensors.emplace("w_vup", std::move(wv));
    if (c.softcap) in.scalars["cap"] = 5.0;
    if (c.band >= 0) {  // per head, both signs: the band term as large as the score
        HostTensor alpha(DType::f32, {c.hq});
        reference::fill_normal(alpha, seed + 8, 0.0, 0.7);
        in.tensors.emplace("alpha", std::move(alpha));
    }
    if (c.gate) {
        HostTensor g(c.dtype, {c.batch, c.hq, c.nq, c.dv});
        reference::fill_normal(g, seed + 6);
        in.tensors.emplace("gate", std::move(g));
    }
    if (c.sinks) {
        HostTensor s(DType::f32, {c.hq});
        reference::fill_normal(s, seed + 7, 2.0, 1.0);
        in.tensors.emplace("sinks", std::move(s));
    }
    return in;
}

}  // namespace attnjit::gputest
