#include "corpus.h"

#include <cctype>
#include <random>
#include <string_view>

#include "dsl/example_specs.h"
#include "dsl/spec_json.h"
#include "limit_documents.h"
#include "random_expr.h"

namespace attnjit::fuzz {
namespace {

// rng() % n rather than std::uniform_int_distribution, whose results the standard leaves
// to the library: the corpus must be the same with libstdc++ and libc++.
struct Rng {
    std::mt19937 engine;
    size_t below(size_t n) { return n == 0 ? 0 : engine() % n; }
    bool chance(unsigned one_in) { return engine() % one_in == 0; }
    template <class T, size_t N>
    const T& pick(const T (&items)[N]) {
        return items[below(N)];
    }
};

const char* const kInterestingNumbers[] = {
    "0", "-0", "1", "-1", "2147483647", "2147483648", "-2147483648", "-2147483649", "4294967296",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "99999999999999999999999", "1e308", "1e309", "-1e308", "1e-320", "0.0", "-0.0",
    "1e-45", "3.4028235e38", "3.5e38", "0.5", ".5", "2.", "1e999", "128", "256", "257", "4096", "4097", "33"};

// Tokens of both layers of a document: JSON and the expression syntax inside it.
const char* const kTokens[] = {
    "+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "!", "(", ")", ",", "[", "]",
    "score", "b", "h", "kv_head", "q_idx", "kv_idx", "q_len", "kv_len", "sf", "si", "tf", "tl", "tb",
    "exp", "exp2", "log", "log2", "tanh", "sigmoid", "abs", "sqrt", "rsqrt", "floor", "ceil", "sin", "cos",
    "min", "max", "pow", "select", "clamp", "float", "int", "true", "false", "inf", "nan", "null",
    "{", "}", ":", "\"", "\\", "\\u0000", "\\ud800", "//", "/*", "*/", "\"f16\"", "\"bf16\"", "\"f32\"", "\"i32\"",
    "\"i64\"", "\"u8\"", "\"int\"", "\"float\"", "{}", "[]", "\"rank\"", "\"dtype\"", "\"mask\"", "\"score_mod\"",
    "\"scalars\"", "\"tensors\"", "\"head_dim\"", "\"scale\"", "\"q_heads\"", "\"kv_heads\"", "\"return_lse\""};

// Expressions dropped into a score_mod or mask whole: the shapes the known bugs had, and
// their neighbours.
const char* const kExpressions[] = {
    "q_idx < -9223372036854775808 / -1", "q_idx < -9223372036854775808 % -1",
    "q_idx + 9223372036854775807 + 9223372036854775807 > 0", "q_idx < 4294967296 * 4294967296",
    "q_idx < -(-9223372036854775808)", "max(q_idx, 2147483648) > kv_idx", "abs(-9223372036854775808) > kv_idx",
    "q_idx - -9223372036854775808 > kv_idx", "int(1e300) > q_idx", "int(nan) == q_idx", "int(-inf) < kv_idx",
    "q_idx / 0 > kv_idx", "q_idx % 0 == 0", "kv_idx <= q_idx && q_idx - kv_idx < 2147483647 + 1",
    "select(q_idx > kv_idx, 9223372036854775807, -9223372036854775807 - 1) > 0",
    "score * 1e308 * 1e308", "score / 0.0", "pow(score, -0.0)", "float(9223372036854775807) + score",
    "score + float(int(score * 1e30))", "min(q_idx, kv_idx) * 65536 * 65536 > 1",
    "clamp(q_idx, 2147483647, -2147483648) == kv_idx", "(q_idx < kv_idx) == (kv_idx < q_idx)",
    "-q_idx < -(-(-(kv_idx)))", "!!!(q_idx < kv_idx)", "abs(q_idx - kv_idx) % 2147483647 < 3"};

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

// Splits text into identifier/number runs, whitespace runs, two-character operators and
// single characters; concatenating the tokens gives the text back.
std::vector<std::string_view> tokenize(std::string_view s) {
    std::vector<std::string_view> t;
    for (size_t i = 0; i < s.size();) {
        size_t j = i + 1;
        if (is_ident(s[i])) {
            while (j < s.size() && is_ident(s[j])) ++j;
        } else if (std::isspace(static_cast<unsigned char>(s[i]))) {
            while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
        } else {
            for (std::string_view op : {"<=", ">=", "==", "!=", "&&", "||", "//", "/*", "*/"})
                if (s.substr(i, 2) == op) j = i + 2;
        }
        t.push_back(s.substr(i, j - i));
        i = j;
    }
    return t;
}

std::string join(const std::vector<std::string_view>& tokens) {
    std::string r;
    for (auto t : tokens) r += t;
    return r;
}

class Mutator {
public:
    Mutator(Rng& rng, const std::vector<const Document*>& pool) : rng_(rng), pool_(pool) {}

    // Applies one mutation; returns its name.
    std::string mutate(std::string& doc) {
        if (doc.empty()) doc = "{}";
        switch (rng_.below(9)) {
        case 0: {
            doc[rng_.below(doc.size())] ^= static_cast<char>(1u << rng_.below(8));
            return "bit flip";
        }
        case 1: return byte_edit(doc);
        case 2: return splice(doc);
        case 3: return token_replace(doc);
        case 4: return token_swap(doc);
        case 5: return token_repeat(doc);
        case 6: return number_replace(doc);
        case 7: return expression_replace(doc);
        default: return token_delete(doc);
        }
    }

private:
    std::string byte_edit(std::string& doc) {
        static const std::string alphabet = "{}[]:,\"\\/*0123456789.-+eE truefalsnl\n\t\x01\x7f\xc3\xa9\xff";
        const size_t at = rng_.below(doc.size());
        const char c = alphabet[rng_.below(alphabet.size())];
        switch (rng_.below(3)) {
        case 0: doc.erase(at, 1); return "byte delete";
        case 1: doc.insert(at, 1, c); return "byte insert";
        default: doc[at] = c; return "byte replace";
        }
    }

    std::string splice(std::string& doc) {
        const Document& other = *pool_[rng_.below(pool_.size())];
        const size_t cut = rng_.below(doc.size() + 1);
        const size_t from = rng_.below(other.text.size() + 1);
        doc = doc.substr(0, cut) + other.text.substr(from);
        return "splice with " + other.name;
    }

    std::string token_replace(std::string& doc) {
        auto t = tokenize(doc);
        const std::string_view with = rng_.pick(kTokens);
        t[rng_.below(t.size())] = with;
        doc = join(t);
        return "token replace";
    }

    std::string token_swap(std::string& doc) {
        auto t = tokenize(doc);
        std::swap(t[rng_.below(t.size())], t[rng_.below(t.size())]);
        doc = join(t);
        return "token swap";
    }

    std::string token_delete(std::string& doc) {
        auto t = tokenize(doc);
        t.erase(t.begin() + static_cast<long>(rng_.below(t.size())));
        doc = join(t);
        return "token delete";
    }

    // Repeats a short run of tokens: "+ q_idx" 500 times is a long operator chain.
    std::string token_repeat(std::string& doc) {
        const auto t = tokenize(doc);
        const size_t at = rng_.below(t.size()), len = 1 + rng_.below(4);
        const size_t times = rng_.pick({2, 3, 10, 100, 255, 256, 1000, 5000});
        std::string run;
        for (size_t i = at; i < at + len && i < t.size(); ++i) run += t[i];
        std::string r;
        for (size_t i = 0; i < t.size(); ++i) {
            r += t[i];
            if (i == at)
                for (size_t k = 1; k < times && r.size() < (1u << 20); ++k) r += run;
        }
        doc = r;
        return "token run repeated " + std::to_string(times) + "x";
    }

    std::string number_replace(std::string& doc) {
        auto t = tokenize(doc);
        std::vector<size_t> numbers;
        for (size_t i = 0; i < t.size(); ++i)
            if (std::isdigit(static_cast<unsigned char>(t[i][0]))) numbers.push_back(i);
        const size_t i = numbers.empty() ? rng_.below(t.size()) : numbers[rng_.below(numbers.size())];
        t[i] = rng_.pick(kInterestingNumbers);
        doc = join(t);
        return "number replace";
    }

    // Replaces the value of "score_mod" or "mask" (if present) with a whole expression.
    std::string expression_replace(std::string& doc) {
        const bool mask = rng_.chance(2);
        const std::string key = mask ? "\"mask\": " : "\"score_mod\": ";
        const size_t at = doc.find(key);
        std::string expr = rng_.pick(kExpressions);
        if (!mask) expr = "score + float(" + expr + ")";
        if (at == std::string::npos) {
            const size_t brace = doc.find('{');
            if (brace == std::string::npos) return "expression replace (no place)";
            doc.insert(brace + 1, key + "\"" + expr + "\", ");
        } else {
            const size_t begin = at + key.size();
            size_t end = doc.find('\n', begin);
            if (end == std::string::npos) end = doc.size();
            if (end > begin && doc[end - 1] == ',') --end;
            doc.replace(begin, end - begin, "\"" + expr + "\"");
        }
        return std::string("expression replace (") + (mask ? "mask" : "score_mod") + ")";
    }

    Rng& rng_;
    const std::vector<const Document*>& pool_;
};

dsl::AttentionSpec random_spec(Rng& rng, dsl::testing::RandomExprGenerator& gen) {
    const DType dtypes[] = {DType::f16, DType::bf16, DType::f32};
    const int dims[] = {32, 64, 96, 128, 256};
    const int heads[][2] = {{0, 0}, {8, 2}, {16, 16}, {32, 8}, {1, 1}, {12, 4}};
    const double scales[] = {0.125, 1.0 / 3.0, 2.0, 1e-3, -0.5, 6.02214076e23, 1.17549435e-38};
    const int dqk = rng.pick(dims);
    dsl::AttentionSpec spec = dsl::AttentionSpec().dtype(rng.pick(dtypes)).head_dims(dqk, rng.chance(3) ? rng.pick(dims) : dqk);
    const auto& h = rng.pick(heads);
    spec.heads(h[0], h[1]);
    if (!rng.chance(4)) spec.score_mod(gen.make(dsl::Type::Float, static_cast<int>(rng.below(6))));
    if (!rng.chance(4)) spec.mask(gen.make(dsl::Type::Bool, static_cast<int>(rng.below(5)), /*allow_score=*/false));
    if (rng.chance(3)) spec.scale(rng.pick(scales));
    if (rng.chance(4)) spec.return_lse();
    return spec;
}

// Writes a valid spec in one of the forms a person might: canonical, single "head_dim",
// with comments, without the default keys.
std::string written(Rng& rng, const dsl::AttentionSpec& spec) {
    std::string doc = dsl::spec_to_json(spec);
    auto replace = [&](const std::string& from, const std::string& to) {
        const size_t at = doc.find(from);
        if (at != std::string::npos) doc.replace(at, from.size(), to);
    };
    switch (rng.below(4)) {
    case 0: break;
    case 1:
        if (spec.head_dim_qk() == spec.head_dim_v()) {
            const std::string d = std::to_string(spec.head_dim_qk());
            replace("\"head_dim_qk\": " + d + ",\n  \"head_dim_v\": " + d, "\"head_dim\": " + d);
        }
        break;
    case 2:
        replace("{\n", "{  // written by the fuzz corpus\n  /* a block\n     comment */\n");
        break;
    default:
        for (const char* line : {"  \"q_heads\": 0,\n", "  \"kv_heads\": 0,\n", "  \"scale\": null,\n",
                                 "  \"return_lse\": false,\n", "  \"scalars\": {},\n", "  \"tensors\": {},\n"})
            replace(line, "");
        break;
    }
    return doc;
}

std::vector<Document> valid_documents(Rng& rng, int count) {
    std::vector<Document> docs;
    dsl::testing::RandomExprGenerator gen(static_cast<unsigned>(rng.engine()));
    const DType dtypes[] = {DType::f16, DType::bf16, DType::f32};
    const int dims[] = {32, 64, 96, 128, 256};
    // The named examples and modifiers first: the specs people actually write.
    for (const auto& named : {dsl::example_specs(rng.pick(dtypes), rng.pick(dims)),
                              dsl::modifier_specs(rng.pick(dtypes), rng.pick(dims))})
        for (const auto& [name, spec] : named)
            if (static_cast<int>(docs.size()) < count) docs.push_back({"example " + name, written(rng, spec)});
    for (int n = 0; static_cast<int>(docs.size()) < count; ++n) {
        dsl::AttentionSpec spec = random_spec(rng, gen);
        if (spec.why_invalid()) continue;  // e.g. a negative scale without a score_mod
        docs.push_back({"valid#" + std::to_string(n), written(rng, spec)});
    }
    return docs;
}

}  // namespace

std::vector<Document> generate_corpus(unsigned seed, int count, const std::vector<Document>& seeds) {
    Rng rng{std::mt19937(seed)};
    std::vector<Document> docs = valid_documents(rng, count / 4);
    for (auto& d : limit_documents()) docs.push_back(std::move(d));
    // Mutants start from anything small enough to mutate quickly.
    std::vector<const Document*> pool;
    for (const std::vector<Document>* list : {const_cast<const std::vector<Document>*>(&docs), &seeds})
        for (const auto& d : *list)
            if (d.text.size() < (64u << 10)) pool.push_back(&d);
    const size_t originals = docs.size();
    Mutator mutator(rng, pool);
    std::vector<Document> mutants;
    for (int n = 0; static_cast<int>(originals + mutants.size()) < count && !pool.empty(); ++n) {
        const Document& base = *pool[rng.below(pool.size())];
        std::string text = base.text, how;
        for (int edits = 1 + static_cast<int>(rng.below(3)); edits > 0; --edits)
            how += (how.empty() ? "" : ", ") + mutator.mutate(text);
        mutants.push_back({"mutant#" + std::to_string(n) + " (" + how + " of " + base.name + ")", std::move(text)});
    }
    for (auto& m : mutants) docs.push_back(std::move(m));
    if (static_cast<int>(docs.size()) > count) docs.resize(static_cast<size_t>(count));
    return docs;
}

}  // namespace attnjit::fuzz
