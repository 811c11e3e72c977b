// Named example specs, shared by tools/attnjit-gen, the tests, the examples and the
// benchmarks, so every one of them means the same thing by "alibi_causal".
//
//   plain                   no score_mod, no mask
//   causal                  causal(TopLeft): kv_idx <= q_idx
//   causal_bottom_right     causal(BottomRight): kv_idx <= q_idx + Nk - Nq
//   alibi_causal            alibi(slopes f32 [Hq]) + causal
//   softcap_sliding_window  softcap(scalar "cap") + sliding_window(int_scalar "window")
//   bias                    bias(bias [B, Hq, Nq, Nk], same dtype as Q)
//   document                document_mask(doc_ids i32 [B, N])
//   prefix_lm               prefix_lm(int_scalar "prefix_len")
//   relpos                  relative_position_bias(rel_table f32 [Hq, 257], 128)
//   gqa                     causal with 32 query heads over 8 key/value heads
//   sinks_sliding_window    sliding_window(int_scalar "window") + attention sinks (sinks f32 [Hq]),
//                           gpt-oss style
//   gated_bias              bias(bias [B, Hq, Nq, Nk]) + an output gate (gate [B, Hq, Nq, Dv]):
//                           out = sigmoid(gate) * O, AlphaFold style
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dsl/attention_spec.h"
#include "support/dtype.h"

namespace attnjit::dsl {

// Every example, in the order above, with Q/K/V dtype `dtype` and head dim `head_dim`.
std::vector<std::pair<std::string, dsl::AttentionSpec>> example_specs(DType dtype = DType::f16, int head_dim = 128);
// One example by name; UserError listing the names when there is none.
dsl::AttentionSpec example_spec(const std::string& name, DType dtype = DType::f16, int head_dim = 128);
std::vector<std::string> example_names();

// One spec per ready-made modifier of dsl/mods.h (both causal alignments, sliding
// window both ways, document mask with one and two tensors, prefix-LM, softcap, ALiBi,
// bias, relative position bias, compose), named after it.
std::vector<std::pair<std::string, dsl::AttentionSpec>> modifier_specs(DType dtype = DType::f16, int head_dim = 128);

}  // namespace attnjit::dsl
