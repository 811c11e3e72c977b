// Let-bindings introduced by codegen: a named temporary (dsl::Temp) and its value, plus
// the loop level at which the value is computed.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "dsl/ir.h"

namespace attnjit::codegen {

// Where a value is computed in the kernel, from outermost to innermost:
//  Head:    once per (batch, head) CTA, in Variant::make_head (b, h, kv_head, q_len,
//           kv_len, scalars, tensors indexed by those);
//  Row:     once per query row, in Variant::make_row (also q_idx);
//  Element: per score element, in score_mod / mask (reads kv_idx or the score).
enum class Level { Head = 0, Row = 1, Element = 2 };

const char* level_name(Level l);

struct Binding {
    std::string name;  // the dsl::Temp name that refers to it ("h0", "r1", "t2")
    dsl::Expr value;   // may refer to earlier bindings through dsl::Temp nodes
    Level level = Level::Element;
};

using Bindings = std::vector<Binding>;

// "name = value" on one line.
std::ostream& operator<<(std::ostream& os, const Binding& b);

// The value with every Temp that names one of `bindings` replaced by its (recursively
// inlined) value: the DSL text a binding came from, for comments and analyses.
dsl::Expr inline_bindings(const dsl::Expr& e, const Bindings& bindings);

// The binding named `name`, or null.
const Binding* find_binding(const Bindings& bindings, const std::string& name);

}  // namespace attnjit::codegen
