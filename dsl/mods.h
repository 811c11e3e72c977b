// Ready-made score modifiers and masks, written in the DSL itself (nothing here is
// special to the compiler: a user could write each one in a line).
#pragma once

#include "dsl/ir.h"
#include "dsl/vars.h"

namespace attnjit::dsl::mods {

// Which diagonal a causal mask keeps when Nq != Nk.
//  TopLeft:     keep j <= i            (PyTorch SDPA is_causal, FlexAttention). The default.
//  BottomRight: keep j <= i + Nk - Nq  (FlashAttention-2, KV-cache decode).
enum class CausalAlign { TopLeft, BottomRight };

// --- masks ---------------------------------------------------------------------------
Expr causal(CausalAlign align = CausalAlign::TopLeft);
// Causal, and only the last `window` keys up to the diagonal: 0 <= d < window with
// d = i - j (TopLeft) or i + Nk - Nq - j (BottomRight). window = 1 keeps the diagonal.
Expr sliding_window(const Expr& window, CausalAlign align = CausalAlign::TopLeft);
// Keys and queries attend within the same document: doc[b, i] == doc[b, j]
// (doc: an int tensor [B, N]; pass a second tensor when queries and keys differ).
Expr document_mask(const Tensor& doc_ids);
Expr document_mask(const Tensor& q_doc_ids, const Tensor& kv_doc_ids);
// Prefix-LM: the first `prefix_len` keys are visible to every query, the rest causally.
Expr prefix_lm(const Expr& prefix_len);

// --- score mods (each returns a float expression of score()) --------------------------
// c * tanh(score / c)
Expr softcap(const Expr& cap);
// score + slope[h] * (j - i)   (slopes: a float tensor [Hq])
Expr alibi(const Tensor& slopes);
// score + bias[b, h, i, j]     (bias: a float tensor [B, Hq, Nq, Nk]; stride 0 broadcasts)
Expr bias(const Tensor& bias4d);
// score + table[h, clamp(j - i, -max_distance, max_distance) + max_distance]
// (table: a float tensor [Hq, 2 * max_distance + 1])
Expr relative_position_bias(const Tensor& table, int max_distance);

// outer with every score() replaced by inner: compose(softcap(30), alibi(s)) caps the
// ALiBi-biased score.
Expr compose(const Expr& outer, const Expr& inner);

}  // namespace attnjit::dsl::mods
