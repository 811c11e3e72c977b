// Specs whose backward computes gradients of captured tensors and scalars (issue 8 item 4),
// shared by the codegen, NVRTC and GPU tests: each with the names whose gradients it asks for.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "dsl/attention_spec.h"
#include "dsl/dsl.h"
#include "dsl/mods.h"
#include "dsl/vars.h"

namespace attnjit::testing {

struct InputGradSpec {
    std::string name;
    dsl::AttentionSpec spec;
    std::set<std::string> grads;
};

// bias [B, Hq, Nq, Nk] (f32 or the dtype given), slopes [Hq] f32, temp [1] f32, scalar cap,
// relative-position tables table [Hq, 17] and kv_table [Hkv, 9] f32, a table gathered
// through an int tensor seg_bias [Hq, S] f32 at seg [Nk] i32.
inline std::vector<InputGradSpec> input_grad_specs(DType dtype, int head_dim, DType bias_dtype = DType::f32) {
    using namespace dsl;
    const Tensor bias("bias", bias_dtype, 4), slopes("slopes", DType::f32, 1), temp("temp", DType::f32, 1);
    auto base = [&] { return AttentionSpec().dtype(dtype).head_dim(head_dim).return_lse(); };
    std::vector<InputGradSpec> out;
    out.push_back({"bias", base().score_mod(mods::bias(bias)), {"bias"}});
    out.push_back({"bias_causal", base().score_mod(mods::bias(bias)).mask(mods::causal()), {"bias"}});
    out.push_back({"alibi_causal", base().score_mod(mods::alibi(slopes)).mask(mods::causal()), {"slopes"}});
    out.push_back({"temperature", base().score_mod(score() * temp(0)), {"temp"}});
    out.push_back({"softcap_scalar", base().score_mod(mods::softcap(scalar("cap"))).mask(mods::causal()), {"cap"}});
    // Everything at once: a stored bias, per-CTA sums of slopes and a scalar, a softcap.
    out.push_back({"bias_alibi_softcap",
                   base()
                       .score_mod(mods::compose(mods::softcap(scalar("cap")),
                                                score() + bias(batch(), head(), q_idx(), kv_idx()) +
                                                    slopes(head()) * (kv_idx() - q_idx())))
                       .mask(mods::sliding_window(48)),
                   {"bias", "slopes", "cap"}});
    // Diagonal reads: summed per table element (relative_position_bias), and one per kv
    // head under a softcap and a causal mask, with slopes summed per CTA beside it.
    const Tensor table("table", DType::f32, 2), kv_table("kv_table", DType::f32, 2);
    out.push_back({"relpos", base().score_mod(mods::relative_position_bias(table, 8)), {"table"}});
    out.push_back({"relpos_kv_head_softcap",
                   base()
                       .score_mod(mods::compose(mods::softcap(scalar("cap")),
                                                score() + kv_table(kv_head(), clamp(kv_idx() - q_idx(), -4, 4) + 4) +
                                                    slopes(head()) * (kv_idx() - q_idx())))
                       .mask(mods::causal()),
                   {"kv_table", "slopes"}});
    // A gathered read (its index read from a tensor): a table site like the diagonal ones.
    const Tensor seg_bias("seg_bias", DType::f32, 2), seg("seg", DType::i32, 1);
    out.push_back({"gather_segment", base().score_mod(score() + seg_bias(head(), clamp(seg(kv_idx()), 0, 6))).mask(mods::causal()),
                   {"seg_bias"}});
    return out;
}

}  // namespace attnjit::testing
