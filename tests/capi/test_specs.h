// Specs the C API tests hand over as JSON: every kind of input the launch arguments carry.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dsl/dsl.h"

namespace attnjit::capitest {

// Reads two captured tensors ("slopes" f32[Hq], "bias" bf16 4-D) and two scalars ("cap"
// float, "window" int): names chosen so that sorted order differs from creation order.
inline dsl::AttentionSpec spec_with_every_input() {
    using namespace dsl;
    Tensor slopes("slopes", DType::f32, 1);
    Tensor bias("bias", DType::bf16, 4);
    return AttentionSpec()
        .dtype(DType::bf16)
        .head_dim(128)
        .score_mod(mods::compose(mods::softcap(scalar("cap")), mods::compose(mods::alibi(slopes), mods::bias(bias))))
        .mask(mods::sliding_window(int_scalar("window"), mods::CausalAlign::BottomRight))
        .return_lse();
}

// A spread of specs for the JSON round trip, named for failure messages.
inline std::vector<std::pair<std::string, dsl::AttentionSpec>> round_trip_specs() {
    using namespace dsl;
    return {
        {"plain f16", AttentionSpec().dtype(DType::f16).head_dim(64)},
        {"causal bf16 with lse", AttentionSpec().dtype(DType::bf16).head_dim(128).mask(mods::causal()).return_lse()},
        {"f32 head dims 64x128, heads 8/2, scale", AttentionSpec().dtype(DType::f32).head_dims(64, 128).heads(8, 2).scale(0.125)},
        {"softcap constant, causal bottom-right",
         AttentionSpec().dtype(DType::bf16).head_dim(128).score_mod(mods::softcap(30.0)).mask(
             mods::causal(mods::CausalAlign::BottomRight))},
        {"every input", spec_with_every_input()},
        {"document mask and relative position",
         AttentionSpec()
             .dtype(DType::f16)
             .head_dim(64)
             .score_mod(mods::relative_position_bias(Tensor("rel", DType::f32, 2), 16))
             .mask(mods::document_mask(Tensor("q_doc", DType::i32, 2), Tensor("kv_doc", DType::i32, 2)) &&
                   mods::prefix_lm(int_scalar("prefix")))},
        {"attention sinks bf16 with a window",
         AttentionSpec()
             .dtype(DType::f16)
             .head_dim(64)
             .mask(mods::sliding_window(int_scalar("window")))
             .sinks("sinks", DType::bf16)
             .return_lse()},
    };
}

}  // namespace attnjit::capitest
