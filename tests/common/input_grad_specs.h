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
// relative-position tables table [Hq, 17] and kv_table [Hkv, 9] f32, per-query biases
// q_bias [B, Hq, Nq], qh_bias [Hq, Nq], per-key biases kv_bias [Hq, Nk], k_bias [Nk],
// kvh_bias [Hkv, Nk] f32, a table gathered through an int tensor seg_bias [Hq, 7] f32 at
// seg [Nk] i32.
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
    // Per-query reads (summed over the keys of a row in backward_dq): direct (q_bias covers
    // b, h, q) and summed over the batch (qh_bias[h, q]) beside a scalar; per-key reads
    // (summed over the queries of a key in backward_dkdv): per query head, over everything
    // (k_bias[k]) under a softcap and a window, and per kv head beside per-query and
    // elementwise reads.
    const Tensor q_bias("q_bias", DType::f32, 3), qh_bias("qh_bias", DType::f32, 2), kv_bias("kv_bias", DType::f32, 2),
        k_bias("k_bias", DType::f32, 1), kvh_bias("kvh_bias", DType::f32, 2);
    out.push_back({"q_bias_causal", base().score_mod(score() + q_bias(batch(), head(), q_idx())).mask(mods::causal()),
                   {"q_bias"}});
    out.push_back({"qh_bias_softcap",
                   base().score_mod(mods::compose(mods::softcap(scalar("cap")), score() + qh_bias(head(), q_idx()))),
                   {"qh_bias", "cap"}});
    out.push_back({"kv_bias_causal", base().score_mod(score() + kv_bias(head(), kv_idx())).mask(mods::causal()),
                   {"kv_bias"}});
    out.push_back({"k_bias_window_softcap",
                   base()
                       .score_mod(mods::compose(mods::softcap(scalar("cap")), score() + k_bias(kv_idx())))
                       .mask(mods::sliding_window(48)),
                   {"k_bias"}});
    out.push_back({"row_col_mix",
                   base()
                       .score_mod(score() + q_bias(batch(), head(), q_idx()) + kvh_bias(kv_head(), kv_idx()) +
                                  bias(batch(), head(), q_idx(), kv_idx()))
                       .mask(mods::causal()),
                   {"q_bias", "kvh_bias", "bias"}});
    // A gathered read (its index read from a tensor): a table site like the diagonal ones.
    const Tensor seg_bias("seg_bias", DType::f32, 2), seg("seg", DType::i32, 1);
    out.push_back({"gather_segment",
                   base().score_mod(score() + seg_bias(head(), clamp(seg(kv_idx()), 0, 6))).mask(mods::causal()),
                   {"seg_bias"}});
    return out;
}

// Whether a gradient of these specs is written once per element (elementwise, per-query,
// per-key: through planes where elements receive sums), not summed per CTA.
inline bool stored_grad(const std::string& name) {
    return name == "bias" || name == "q_bias" || name == "qh_bias" || name == "kv_bias" || name == "k_bias" ||
           name == "kvh_bias";
}
inline bool key_grad(const std::string& name) { return name == "kv_bias" || name == "k_bias" || name == "kvh_bias"; }

}  // namespace attnjit::testing
