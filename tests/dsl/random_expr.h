// A seeded generator of well-typed expressions for round-trip tests of the text forms.
// It builds nodes with their make() functions (so it also produces shapes the operators
// never build, such as a Neg node over a literal) and covers every node kind but Temp,
// every unary and binary op, both negative-literal forms, and the extreme literals.
#pragma once

#include <map>
#include <random>
#include <string>

#include "dsl/attention_spec.h"
#include "dsl/ir.h"

namespace attnjit::dsl::testing {

class RandomExprGenerator {
public:
    explicit RandomExprGenerator(unsigned seed) : rng_(seed) {}

    // An expression of type `t` at most `depth` levels deep; with `allow_score` false it
    // never reads the score (a mask).
    Expr make(Type t, int depth, bool allow_score = true);

    // The scalars and tensors the generator reads (with the types it reads them as).
    static const std::map<std::string, Type>& scalars();
    static const std::map<std::string, TensorInfo>& tensors();

private:
    Expr leaf(Type t, bool allow_score);
    Expr literal(Type t);
    Expr tensor_load(Type t, int depth, bool allow_score);
    int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

    std::mt19937 rng_;
};

}  // namespace attnjit::dsl::testing
