// Structural equality and a deterministic structural hash (no pointers, no iteration
// over unordered containers): the same expression built twice, in any process, hashes
// the same. Cache keys depend on this.
#pragma once

#include <cstdint>

#include "dsl/ir.h"

namespace attnjit::dsl {

bool equal(const Expr& a, const Expr& b);
uint64_t structural_hash(const Expr& e);
// Mixes v into h (used to hash composite objects such as AttentionSpec).
uint64_t hash_combine(uint64_t h, uint64_t v);
uint64_t hash_string(const std::string& s);

}  // namespace attnjit::dsl
