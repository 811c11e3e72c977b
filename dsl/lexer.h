// Tokens of the expression syntax (dsl/parser.h): names, decimal numbers, C operators
// and brackets. Whitespace and newlines separate tokens and are otherwise ignored.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace attnjit::dsl {

enum class TokenKind {
    Name,   // [A-Za-z_][A-Za-z0-9_]*: variables, scalars, tensors, functions, true/false/inf/nan
    Int,    // 42
    Float,  // 1.5  2.  .5  1e-3  (validated; the parser converts the value)
    LParen, RParen, LBracket, RBracket, Comma,
    Plus, Minus, Star, Slash, Percent, Not,
    EqEq, NotEq, Less, LessEq, Greater, GreaterEq, AndAnd, OrOr,
    End,  // one past the last token
};

struct Token {
    TokenKind kind;
    std::string_view text;  // the characters of the token ("" for End)
    size_t offset;          // byte offset in the expression text
};

// A mistake in the expression text at a byte offset; parse_expr turns it into a
// SpecParseError with a line and column.
struct ExprSyntaxError {
    std::string reason;
    size_t offset;
};

// Throws ExprSyntaxError for a character that starts no token or a malformed number.
std::vector<Token> tokenize(std::string_view text);

// "'+'", "name 'foo'", "number '2.0'", "the end of the expression": for "found ..." messages.
std::string describe(const Token& t);
// The spelling of a punctuation token kind ("'('" etc.).
const char* spelling(TokenKind k);

}  // namespace attnjit::dsl
