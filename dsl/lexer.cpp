#include "dsl/lexer.h"

#include <cctype>
#include <cstdio>

namespace attnjit::dsl {
namespace {

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

struct Punct {
    const char* text;
    TokenKind kind;
};
// Two-character operators first, so "<=" is not read as "<" then "=".
constexpr Punct kPuncts[] = {
    {"==", TokenKind::EqEq}, {"!=", TokenKind::NotEq}, {"<=", TokenKind::LessEq}, {">=", TokenKind::GreaterEq},
    {"&&", TokenKind::AndAnd}, {"||", TokenKind::OrOr}, {"(", TokenKind::LParen}, {")", TokenKind::RParen},
    {"[", TokenKind::LBracket}, {"]", TokenKind::RBracket}, {",", TokenKind::Comma}, {"+", TokenKind::Plus},
    {"-", TokenKind::Minus}, {"*", TokenKind::Star}, {"/", TokenKind::Slash}, {"%", TokenKind::Percent},
    {"!", TokenKind::Not}, {"<", TokenKind::Less}, {">", TokenKind::Greater},
};

// Characters people reach for that the syntax spells differently.
const char* hint_for(char c) {
    switch (c) {
    case '=': return "; did you mean '==' (there is no assignment)?";
    case '&': return "; did you mean '&&'?";
    case '|': return "; did you mean '||'?";
    case '?':
    case ':': return "; for a conditional write select(cond, if_true, if_false)";
    case '^': return "; for a power write pow(x, y)";
    case '{':
    case '}': return "; group with ( ) and index tensors with [ ]";
    case ';': return "; an expression has no statements";
    case '"':
    case '\'': return "; names and numbers are written without quotes";
    default: return "";
    }
}

// The whole (possibly multi-byte) character at `i`, for the message; a control character
// is named by its code.
std::string character_at(std::string_view text, size_t i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
        char code[8];
        std::snprintf(code, sizeof code, "U+%04X", c);
        return code;
    }
    size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    return std::string(text.substr(i, n));
}

// Reads the longest run that could belong to a number (so "1.2.3" and "2x" are one bad
// token, not a number followed by something), then checks it is a decimal literal:
// digits [. digits] [e [+-] digits], at least one digit before the exponent.
Token number(std::string_view text, size_t start) {
    size_t i = start;
    while (i < text.size()) {
        char c = text[i];
        bool sign_of_exponent = (c == '+' || c == '-') && (text[i - 1] == 'e' || text[i - 1] == 'E');
        if (is_name_char(c) || c == '.' || sign_of_exponent) ++i;
        else break;
    }
    std::string_view t = text.substr(start, i - start);
    auto bad = [&](const std::string& why) {
        throw ExprSyntaxError{"malformed number '" + std::string(t) + "': " + why, start};
    };
    size_t p = 0, mantissa_digits = 0;
    while (p < t.size() && is_digit(t[p])) ++p, ++mantissa_digits;
    bool is_float = false;
    if (p < t.size() && t[p] == '.') {
        is_float = true;
        ++p;
        while (p < t.size() && is_digit(t[p])) ++p, ++mantissa_digits;
    }
    if (mantissa_digits == 0) bad("expected digits");
    if (p < t.size() && (t[p] == 'e' || t[p] == 'E')) {
        is_float = true;
        ++p;
        if (p < t.size() && (t[p] == '+' || t[p] == '-')) ++p;
        size_t exponent_digits = 0;
        while (p < t.size() && is_digit(t[p])) ++p, ++exponent_digits;
        if (exponent_digits == 0) bad("the exponent needs digits, e.g. 1e-3 or 2.5e+4");
    }
    if (p < t.size()) {
        if (t[p] == '.') bad("a number has at most one '.', before any exponent");
        bad("unexpected '" + std::string(1, t[p]) +
            "'; numbers are decimal, e.g. 2, 0.5 or 1e-3, with no suffix or prefix");
    }
    return Token{is_float ? TokenKind::Float : TokenKind::Int, t, start};
}

}  // namespace

std::vector<Token> tokenize(std::string_view text) {
    std::vector<Token> tokens;
    size_t i = 0;
    while (true) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
        if (i == text.size()) break;
        char c = text[i];
        if (is_name_start(c)) {
            size_t start = i;
            while (i < text.size() && is_name_char(text[i])) ++i;
            tokens.push_back(Token{TokenKind::Name, text.substr(start, i - start), start});
            continue;
        }
        if (is_digit(c) || (c == '.' && i + 1 < text.size() && is_digit(text[i + 1]))) {
            tokens.push_back(number(text, i));
            i += tokens.back().text.size();
            continue;
        }
        bool matched = false;
        for (const auto& p : kPuncts) {
            std::string_view s(p.text);
            if (text.substr(i, s.size()) == s) {
                tokens.push_back(Token{p.kind, text.substr(i, s.size()), i});
                i += s.size();
                matched = true;
                break;
            }
        }
        if (!matched)
            throw ExprSyntaxError{"unexpected character '" + character_at(text, i) + "'" + hint_for(c), i};
    }
    tokens.push_back(Token{TokenKind::End, {}, text.size()});
    return tokens;
}

const char* spelling(TokenKind k) {
    for (const auto& p : kPuncts)
        if (p.kind == k) return p.text;
    return "";
}

std::string describe(const Token& t) {
    switch (t.kind) {
    case TokenKind::End: return "the end of the expression";
    case TokenKind::Name: return "name '" + std::string(t.text) + "'";
    case TokenKind::Int:
    case TokenKind::Float: return "number '" + std::string(t.text) + "'";
    default: return "'" + std::string(t.text) + "'";
    }
}

}  // namespace attnjit::dsl
