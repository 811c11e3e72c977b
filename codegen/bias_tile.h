// bias_tile: finds score_mod's bias tile, a captured tensor that score_mod reads at
// [i_0, ..., i_{r-3}, q_idx, kv_idx] with leading indices that depend on b, h, kv_head,
// constants and runtime scalars only (a pair bias, an additive mask tensor): the kernel can
// copy it tile by tile beside K and V (templates/attnjit/common/bias_tile.cuh) instead of
// reading it element by element.
//
// Rules: the tensor's dtype is f16 or bf16 (what the sm80 forward stages; the tile is half
// the size of an f32 one); every read of that tensor whose last two indices are q_idx and
// kv_idx has the same leading indices (reads at other indices, bias[b, h, kv_idx, q_idx],
// stay element reads). The first such tensor in score_mod's reading order is the one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dsl/attention_spec.h"
#include "dsl/ir.h"

namespace attnjit::codegen {

struct BiasTile {
    std::string tensor;                // the captured tensor's name
    DType dtype = DType::f16;          // f16 or bf16
    std::vector<dsl::Expr> leading;    // its indices before (q_idx, kv_idx)
    bool batch_invariant = false;      // no leading index reads b: every batch row reads one tile
};

// Whether `load` reads a bias tile: its last two indices are q_idx, kv_idx and no leading
// index reads q_idx, kv_idx or the score (the emitter's test for the reads it replaces).
bool reads_bias_tile(const dsl::TensorLoad& load);

// The bias tile of a simplified score_mod; nullopt when there is none.
std::optional<BiasTile> find_bias_tile(const dsl::Expr& score_mod);

// find_bias_tile of the spec's simplified score_mod: the one rule lower() and make_config()
// share (a spec with a score convolution gets none: its main loop does not stage).
std::optional<BiasTile> bias_tile_of(const dsl::AttentionSpec& spec);

}  // namespace attnjit::codegen
