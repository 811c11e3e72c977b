#include "limit_documents.h"

#include <string>

namespace attnjit::fuzz {
namespace {

const std::string kHead = R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": 64)";

std::string with_mask(const std::string& mask, const std::string& declarations = "") {
    return kHead + declarations + ", \"mask\": \"" + mask + "\"}";
}

std::string repeat(const std::string& s, int n) {
    std::string r;
    r.reserve(s.size() * static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) r += s;
    return r;
}

// q_idx + q_idx + ... (left-associated: as deep as it is long).
std::string chain(int terms) { return "q_idx" + repeat(" + q_idx", terms - 1); }

// A balanced sum of `leaves` terms: 2 * leaves - 1 nodes, depth about log2(leaves).
std::string balanced(int leaves) {
    if (leaves == 1) return "kv_idx";
    return "(" + balanced(leaves / 2) + " + " + balanced(leaves - leaves / 2) + ")";
}

// `n` declared int scalars s0..s(n-1) (or rank-1 i32 tensors t0..), all read by the mask.
std::string many_inputs(int n, bool tensors) {
    std::string decl = tensors ? ", \"tensors\": {" : ", \"scalars\": {", sum;
    for (int i = 0; i < n; ++i) {
        const std::string name = (tensors ? "t" : "s") + std::to_string(i);
        decl += (i ? ", \"" : "\"") + name + (tensors ? "\": {\"dtype\": \"i32\", \"rank\": 1}" : "\": \"int\"");
        sum += (i ? " + " : "") + name + (tensors ? "[q_idx]" : "");
    }
    return with_mask("kv_idx < " + sum, decl + "}");
}

std::string padded_to(size_t bytes) {
    std::string doc = with_mask("kv_idx <= q_idx");
    doc.insert(doc.size() - 1, bytes - doc.size(), ' ');
    return doc;
}

}  // namespace

std::vector<Document> limit_documents() {
    std::vector<Document> d;
    for (int n : {255, 256, 257, 1000, 4097, 20000})
        d.push_back({"limit: " + std::to_string(n) + "-term + chain", with_mask(chain(n) + " > kv_idx")});
    d.push_back({"limit: 200000-term + chain", with_mask(chain(200000) + " > kv_idx")});
    for (int n : {2047, 2048, 2049, 100000})
        d.push_back({"limit: balanced sum of " + std::to_string(n), with_mask(balanced(n) + " > q_idx")});
    for (int n : {199, 200, 201, 100000})
        d.push_back({"limit: " + std::to_string(n) + " parentheses",
                     with_mask(repeat("(", n) + "q_idx" + repeat(")", n) + " < kv_idx")});
    for (int n : {255, 256, 257, 3000})
        d.push_back({"limit: " + std::to_string(n) + " nested negations",
                     with_mask(repeat("-(", n) + "q_idx" + repeat(")", n) + " < kv_idx")});
    for (int n : {300, 100000})
        d.push_back({"limit: " + std::to_string(n) + " '!'", with_mask(repeat("!", n) + "(q_idx < kv_idx)")});
    for (int n : {256, 257, 10000})
        d.push_back({"limit: " + std::to_string(n) + " nested exp()",
                     kHead + ", \"score_mod\": \"" + repeat("exp(", n) + "score" + repeat(")", n) + "\"}"});
    for (int n : {100, 300})
        d.push_back({"limit: tensor index nested " + std::to_string(n) + " deep",
                     with_mask(repeat("tl[", n) + "q_idx" + repeat("]", n) + " > 0",
                               ", \"tensors\": {\"tl\": {\"dtype\": \"i64\", \"rank\": 1}}")});
    for (int n : {32, 33, 1000}) {
        d.push_back({"limit: " + std::to_string(n) + " scalars", many_inputs(n, false)});
        d.push_back({"limit: " + std::to_string(n) + " tensors", many_inputs(n, true)});
    }
    for (size_t bytes : {size_t{1} << 20, (size_t{1} << 20) + 1, size_t{3} << 20})
        d.push_back({"limit: a document of " + std::to_string(bytes) + " bytes", padded_to(bytes)});
    for (int n : {64, 65, 100000}) {
        const std::string name = "s" + std::string(static_cast<size_t>(n - 1), 'x');
        d.push_back({"limit: a " + std::to_string(n) + "-character scalar name",
                     with_mask("q_idx < " + name, ", \"scalars\": {\"" + name + "\": \"int\"}")});
    }
    d.push_back({"limit: a 100000-character unknown key", kHead + ", \"" + std::string(100000, 'k') + "\": 1}"});
    d.push_back({"limit: JSON nested 100000 deep in mask",
                 kHead + ", \"mask\": " + repeat("[", 100000) + repeat("]", 100000) + "}"});
    for (const char* n : {"2147483648", "-2147483649", "9223372036854775808", "18446744073709551616", "1e400", "-0"})
        d.push_back({std::string("limit: head_dim ") + n,
                     R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": )" + std::string(n) + "}"});
    for (const char* n : {"2147483648", "4294967297", "-9223372036854775808"}) {
        d.push_back({std::string("limit: q_heads ") + n, kHead + ", \"q_heads\": " + n + ", \"kv_heads\": 1}"});
        d.push_back({std::string("limit: tensor rank ") + n,
                     with_mask("t[q_idx] > 0", std::string(", \"tensors\": {\"t\": {\"dtype\": \"i32\", \"rank\": ") + n + "}}")});
    }
    return d;
}

}  // namespace attnjit::fuzz
