// Parses the expression syntax that dsl/printer.h emits back into an Expr:
//   parse(to_string(e), names_of(e)) is structurally equal to e, and printing it again
//   gives the same text. Also accepts what a person would write by hand (extra parentheses,
//   whitespace and newlines, int operands mixed with float ones, which promote as in
//   dsl/operators.h).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "dsl/attention_spec.h"
#include "dsl/ir.h"
#include "dsl/source_diagnostics.h"

namespace attnjit::dsl {

// The names an expression may use besides the built-ins (score, b, h, kv_head, q_idx,
// kv_idx, q_len, kv_len): runtime scalars with their type, captured tensors with dtype
// and rank.
struct ExprNames {
    std::map<std::string, Type> scalars;
    std::map<std::string, TensorInfo> tensors;
};

// Throws SpecParseError (dsl/spec_parse_error.h) with the line and column inside `text`, offset
// by (first_line, first_column) so that an expression embedded in a larger document is
// located in that document.
Expr parse_expr(std::string_view text, const ExprNames& names, std::string_view source_name = "expr",
                int first_line = 1, int first_column = 1);

// The same, for an expression embedded in a document where a plain shift is not enough
// (a JSON string with escape sequences): `position_of(offset)` says where the byte at
// `offset` of `text` (or text.size(), the end) was written. Errors and the positions
// quoted in messages ("the '(' at 3:9") use it.
Expr parse_expr(std::string_view text, const ExprNames& names, std::string_view source_name,
                const std::function<TextPosition(size_t offset)>& position_of);

}  // namespace attnjit::dsl
