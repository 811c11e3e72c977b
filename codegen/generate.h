// generate: AttentionSpec + TileConfig -> KernelSource, the translation unit described in
// templates/README.md: a provenance comment, the Params struct (with a static_assert
// per field offset and on its size), the Variant struct of hooks, the Traits and the
// extern "C" entry point around the hand-written forward template.
#pragma once

#include "attnjit/tile_config.h"
#include "codegen/kernel_plan.h"
#include "codegen/kernel_source.h"
#include "codegen/params_layout.h"
#include "dsl/attention_spec.h"

namespace attnjit::codegen {

// Validates the spec (UserError) and the tile (UserError naming the tile and why it is
// invalid), lowers, and renders. Deterministic: same inputs, same bytes.
KernelSource generate_forward(const dsl::AttentionSpec& spec, TileConfig tile);
// With default_forward_tile() for the spec's dtype and head dims.
KernelSource generate_forward(const dsl::AttentionSpec& spec);
// From an already lowered plan (the tile is still checked).
KernelSource generate_forward(const KernelPlan& plan, TileConfig tile);

// The tile used when none is given.
TileConfig default_tile(const dsl::AttentionSpec& spec);

// "block_m=128 block_n=64 warps=4 stages=2"
std::string tile_string(const TileConfig& t);

}  // namespace attnjit::codegen
