// The JSON spec format: canonical output, exact round trips (same spec, same hash) for
// every example and modifier spec and for random expressions, hand-written documents that
// equal C++-built specs, and located errors for malformed documents.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "dsl/example_specs.h"
#include "dsl/dsl.h"
#include "dsl/spec_json.h"
#include "random_expr.h"

namespace attnjit::dsl {
namespace {

void expect_round_trip(const AttentionSpec& spec) {
    const std::string json = spec_to_json(spec);
    AttentionSpec parsed;
    try {
        parsed = spec_from_json(json);
    } catch (const SpecParseError& e) {
        FAIL() << "did not read back:\n" << json << "\n" << e.what();
    }
    EXPECT_TRUE(parsed == spec) << json;
    EXPECT_EQ(parsed.hash(), spec.hash()) << json;
    EXPECT_EQ(spec_to_json(parsed), json);
}

TEST(SpecJson, CanonicalForm) {
    const Tensor bias("bias", DType::f32, 4);
    const AttentionSpec spec = AttentionSpec()
                                   .dtype(DType::bf16)
                                   .head_dims(128, 64)
                                   .heads(32, 8)
                                   .scale(0.125)
                                   .return_lse()
                                   .score_mod(mods::compose(mods::softcap(scalar("cap")), mods::bias(bias)))
                                   .mask(mods::sliding_window(int_scalar("window")));
    EXPECT_EQ(spec_to_json(spec), R"json({
  "format": "attnjit.spec/1",
  "dtype": "bf16",
  "head_dim_qk": 128,
  "head_dim_v": 64,
  "q_heads": 32,
  "kv_heads": 8,
  "scale": 0.125,
  "return_lse": true,
  "scalars": {
    "cap": "float",
    "window": "int"
  },
  "tensors": {
    "bias": {
      "dtype": "f32",
      "rank": 4
    }
  },
  "score_mod": "cap * tanh((score + bias[b, h, q_idx, kv_idx]) / cap)",
  "mask": "q_idx - kv_idx >= 0 && q_idx - kv_idx < window"
}
)json");
    expect_round_trip(spec);
}

// docs/spec_format.md shows the canonical form of this spec; keep them in step.
TEST(SpecJson, TheDocumentedExampleIsCanonical) {
    std::ifstream in(std::string(ATTNJIT_SOURCE_DIR) + "/docs/spec_format.md");
    ASSERT_TRUE(in.good());
    std::stringstream doc;
    doc << in.rdbuf();
    const std::string text = doc.str(), open = "```jsonc\n";
    const size_t begin = text.find(open), end = text.find("```", begin + open.size());
    ASSERT_NE(begin, std::string::npos);
    const std::string example = text.substr(begin + open.size(), end - begin - open.size());
    const Tensor slopes("slopes", DType::f32, 1);
    const AttentionSpec spec = AttentionSpec()
                                   .dtype(DType::bf16)
                                   .head_dim(128)
                                   .heads(32, 8)
                                   .score_mod(mods::compose(mods::softcap(scalar("cap")), mods::alibi(slopes)))
                                   .mask(mods::sliding_window(int_scalar("window")));
    EXPECT_EQ(spec_to_json(spec), example);
    EXPECT_TRUE(spec_from_json(example) == spec);
}

TEST(SpecJson, DefaultsAreWrittenExplicitly) {
    EXPECT_EQ(spec_to_json(AttentionSpec()), R"json({
  "format": "attnjit.spec/1",
  "dtype": "f16",
  "head_dim_qk": 128,
  "head_dim_v": 128,
  "q_heads": 0,
  "kv_heads": 0,
  "scale": null,
  "return_lse": false,
  "scalars": {},
  "tensors": {},
  "score_mod": null,
  "mask": null
}
)json");
}

TEST(SpecJson, EveryExampleAndModifierSpecRoundTrips) {
    for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
        for (int head_dim : {32, 64, 96, 128, 256}) {
            for (const auto& [name, spec] : dsl::example_specs(dtype, head_dim)) {
                SCOPED_TRACE(name);
                expect_round_trip(spec);
                expect_round_trip(AttentionSpec(spec).scale(0.0883883476483184).return_lse());
            }
            for (const auto& [name, spec] : dsl::modifier_specs(dtype, head_dim)) {
                SCOPED_TRACE(name);
                expect_round_trip(spec);
            }
        }
    }
}

TEST(SpecJson, RandomSpecsRoundTrip) {
    testing::RandomExprGenerator gen(7);
    const double scales[] = {0.125, 1.0 / 3.0, 2.0, 1e-3, -0.5, 6.02214076e23};
    for (int n = 0; n < 400; ++n) {
        AttentionSpec spec = AttentionSpec().dtype(n % 2 ? DType::bf16 : DType::f32).head_dims(n % 3 ? 64 : 128, 96);
        spec.score_mod(gen.make(Type::Float, 1 + n % 5));
        if (n % 4) spec.mask(gen.make(Type::Bool, 1 + n % 4, /*allow_score=*/false));
        if (n % 5 == 0) spec.heads(16, n % 2 ? 4 : 16);
        if (n % 3 == 0) spec.scale(scales[n % 6]);
        ASSERT_FALSE(spec.why_invalid()) << *spec.why_invalid();
        expect_round_trip(spec);
        if (HasFailure()) return;
    }
}

TEST(SpecJson, HandWrittenDocumentEqualsTheCppSpec) {
    const AttentionSpec parsed = spec_from_json(R"json({
  // comments are allowed
  "format": "attnjit.spec/1",
  "dtype": "bf16",
  "head_dim": 128,          /* both head dims */
  "scalars": {"cap": "float"},
  "tensors": {"slopes": {"rank": 1, "dtype": "f32"}},
  "score_mod": "cap * tanh((score + slopes[h] * (kv_idx - q_idx)) / cap)",
  "mask": "kv_idx <= q_idx"
})json");
    const Tensor slopes("slopes", DType::f32, 1);
    const AttentionSpec built = AttentionSpec()
                                    .dtype(DType::bf16)
                                    .head_dim(128)
                                    .score_mod(mods::compose(mods::softcap(scalar("cap")), mods::alibi(slopes)))
                                    .mask(kv_idx() <= q_idx());
    EXPECT_TRUE(parsed == built);
    EXPECT_EQ(parsed.hash(), built.hash());
    EXPECT_FALSE(parsed.scale().has_value()) << "absent scale means 1/sqrt(Dqk)";
    EXPECT_EQ(parsed.q_heads(), 0);
    EXPECT_FALSE(parsed.returns_lse());
}

TEST(SpecJson, NullMeansAbsent) {
    const AttentionSpec parsed = spec_from_json(
        R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim_qk": 64, "head_dim_v": 64, "scale": null,
            "scalars": null, "tensors": null, "score_mod": null, "mask": null, "q_heads": 0, "kv_heads": 0})");
    EXPECT_TRUE(parsed == AttentionSpec().head_dim(64));
    // An integer scale is a number like any other.
    EXPECT_EQ(spec_from_json(R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": 64, "scale": 2})").scale(), 2.0);
}

TEST(SpecJson, WritingAnInvalidSpecIsAUserError) {
    EXPECT_THROW(spec_to_json(AttentionSpec().head_dim(0)), UserError);
    EXPECT_THROW(spec_to_json(AttentionSpec().scale(std::numeric_limits<double>::infinity())), UserError);
}

TEST(SpecJson, MessagesQuoteTheDocumentLine) {
    try {
        spec_from_json("{\"format\": \"attnjit.spec/1\", \"dtype\": \"f16\", \"head_dim\": 128,\n"
                       " \"mask\": \"kv_idx <= q_idx && foo\"}",
                       "my_spec.json");
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind("my_spec.json:2:30: in \"mask\": unknown name 'foo'", 0), 0u) << what;
        EXPECT_NE(what.find("\n     \"mask\": \"kv_idx <= q_idx && foo\"}\n    " + std::string(29, ' ') + "^"),
                  std::string::npos)
            << what;
        EXPECT_EQ(e.line(), 2);
        EXPECT_EQ(e.column(), 30);
    }
}

struct BadDocument {
    const char* json;
    int line, column;
    const char* message;
};

// Each malformed document, where it is wrong, and what the message must say.
const BadDocument kBadDocuments[] = {
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n}", 5, 1, "invalid JSON: syntax error while parsing object key - unexpected '}'; expected string literal (JSON allows no comma before a closing bracket)"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": f16,\n  \"head_dim\": 128\n}", 3, 12, "invalid JSON: syntax error while parsing value - invalid literal"},
    {"", 1, 1, "invalid JSON"},
    {"[1, 2]", 1, 1, "a spec is a JSON object"},
    {"\n  {\n  \"dtype\": \"f16\",\n  \"head_dim\": 128\n}", 2, 3, "missing \"format\""},
    {"{\"format\": \"attnjit.spec/2\", \"dtype\": \"f16\", \"head_dim\": 64}", 1, 12, "unknown format version \"attnjit.spec/2\": this build of attnjit reads \"attnjit.spec/1\""},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"maks\": \"kv_idx <= q_idx\"\n}", 5, 3, "unknown key \"maks\"; did you mean \"mask\"? The keys of a spec are format, dtype"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": \"128\"\n}", 4, 15, "\"head_dim\" must be an integer, found the string \"128\""},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128.5\n}", 4, 15, "must be an integer, found the number 128.5"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"fp16\",\n  \"head_dim\": 128\n}", 3, 12, "unknown dtype \"fp16\"; did you mean \"f16\"?"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"i32\",\n  \"head_dim\": 128\n}", 3, 12, "dtype \"i32\" is not an element type of Q, K and V"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"scalars\": {\"flag\": \"bool\"},\n  \"mask\": \"flag > 0\"\n}", 5, 23, "scalar \"flag\" must have type \"float\" or \"int\", found the string \"bool\""},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"tensors\": {\"bias\": {\"dtype\": \"f8\", \"rank\": 4}},\n  \"score_mod\": \"score + bias[b, h, q_idx, kv_idx]\"\n}", 5, 33, "unknown dtype \"f8\""},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"tensors\": {\"bias\": {\"dtype\": \"f32\", \"rank\": 7}},\n  \"score_mod\": \"score\"\n}", 5, 48, "tensor \"bias\" has rank 7; captured tensors have rank 1 to 6"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"tensors\": {\"bias\": {\"dtype\": \"f32\", \"rnak\": 4}}\n}", 5, 40, "unknown key \"rnak\" in tensor \"bias\"; did you mean \"rank\"?"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"scalars\": {\"cap\": \"float\", \"window\": \"int\"},\n  \"mask\": \"kv_idx <= q_idx && q_idx - kv_idx < window\"\n}", 5, 15, "scalar \"cap\" is declared but neither score_mod nor mask reads it"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"scalars\": {\"exp\": \"float\"}\n}", 5, 15, "scalar name \"exp\" is not usable"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"score_mod\": \"score * cap\"\n}", 5, 25, "in \"score_mod\": unknown name 'cap'. The built-in names are score"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"mask\": \"kv_idx <= q_idx && 1\"\n}", 5, 28, "in \"mask\": type mismatch in (kv_idx <= q_idx) && 1: && needs two bools but got bool and int"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"score_mod\": \"score \\/ 2.0 + sigmoud(score)\"\n}", 5, 32, "unknown function 'sigmoud'; did you mean 'sigmoid'?"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"score_mod\": \"\\u0073core * (1.0 + 2.0\"\n}", 5, 40, "expected ')' to close the '(' at 5:30, found the end of the expression"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 0\n}", 4, 15, "\"head_dim\": head dim 0 is not positive"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim_qk\": 128,\n  \"head_dim_v\": 0\n}", 5, 17, "\"head_dim_v\": head dim 0 is not positive"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim_qk\": 128\n}", 4, 3, "\"head_dim_qk\" is given without \"head_dim_v\""},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"head_dim_v\": 128\n}", 5, 3, "give either \"head_dim\" (for both) or \"head_dim_qk\" and \"head_dim_v\""},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"mask\": \"score > 0.0\"\n}", 5, 11, "reads the score; masks may only depend on indices, scalars and tensors"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"score_mod\": \"q_idx < kv_idx\"\n}", 5, 16, "a score_mod must produce a float score"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"q_heads\": 6, \"kv_heads\": 4\n}", 5, 29, "query heads must be a multiple of key/value heads"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"scale\": \"auto\"\n}", 5, 12, "\"scale\" is a number, or null for 1/sqrt(head_dim_qk); found the string \"auto\""},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"scale\": 1e999\n}", 5, 12, "number overflow parsing '1e999'"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"scale\": -0.5\n}", 5, 12, "a negative scale needs a score_mod"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"return_lse\": 1\n}", 5, 17, "\"return_lse\" is true or false, found the number 1"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"head_dim\": 128,\n  \"score_mod\": 2.0\n}", 5, 16, "\"score_mod\" is an expression in a string"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"dtype\": \"f16\",\n  \"dtype\": \"bf16\",\n  \"head_dim\": 128\n}", 4, 3, "duplicate key \"dtype\" (first given at 3:3); give each key once"},
    {"{\n  \"format\": \"attnjit.spec/1\",\n  \"head_dim\": 128\n}", 1, 1, "missing \"dtype\""},
    {"{\"format\": \"attnjit.spec/1\", \"dtype\": \"f16\", \"head_dim\": 128, \"mask\": \"kv_idx <= q_idx\" \"score_mod\": null}", 1, 89, "invalid JSON: syntax error while parsing object - unexpected string literal; expected '}' (is a ',' missing before it?)"},
};

TEST(SpecJson, MalformedDocumentsAreLocated) {
    for (const auto& bad : kBadDocuments) {
        SCOPED_TRACE(bad.json);
        try {
            AttentionSpec s = spec_from_json(bad.json);
            ADD_FAILURE() << "read as " << s;
        } catch (const SpecParseError& e) {
            EXPECT_EQ(e.line(), bad.line) << e.what();
            EXPECT_EQ(e.column(), bad.column) << e.what();
            EXPECT_NE(std::string(e.what()).find(bad.message), std::string::npos) << e.what();
            EXPECT_EQ(std::string(e.what()).rfind("spec:" + std::to_string(bad.line) + ":" + std::to_string(bad.column) + ": ", 0), 0u)
                << e.what();
        }
    }
}

TEST(SpecJson, ColumnsCountCharactersNotBytes) {
    // "é" is two bytes in UTF-8 but one column.
    try {
        spec_from_json("{\"format\": \"attnjit.spec/1\", \"dtype\": \"f16\", \"head_dim\": 128, /* é */ \"maks\": 1}");
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        EXPECT_EQ(e.column(), 71) << e.what();
        EXPECT_NE(std::string(e.what()).find("unknown key \"maks\""), std::string::npos) << e.what();
    }
}

TEST(SpecJson, LongAndOddStringsAreQuotedSafely) {
    // A long UTF-8 value is shortened between characters, never inside one.
    try {
        spec_from_json(R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": ")" + std::string(36, 'x') +
                       "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" + R"("})");
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        EXPECT_NE(std::string(e.what()).find("must be an integer, found the string \"" + std::string(36, 'x') + "...\""),
                  std::string::npos)
            << e.what();
    }
    // A key with '/' and '~' (escaped in JSON pointers) is still located.
    try {
        spec_from_json(R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": 64, "a/~b": 1})");
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        EXPECT_EQ(e.column(), 62) << e.what();
    }
    // A key with a quote and a newline is escaped as JSON writes it.
    try {
        spec_from_json(R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": 64, "a\"b\nc": 1})");
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        EXPECT_NE(std::string(e.what()).find(R"(unknown key "a\"b\nc")"), std::string::npos) << e.what();
    }
}

TEST(SpecJson, TheWholeStringViewIsRead) {
    const std::string valid = R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": 128})";
    const std::string with_nul = valid + std::string("\0x", 2);
    EXPECT_THROW(spec_from_json(with_nul), SpecParseError) << "bytes after an embedded NUL are part of the document";
    EXPECT_NO_THROW(spec_from_json(std::string_view(with_nul.data(), valid.size())));
}

// Whatever the bytes, the reader answers with a spec or a SpecParseError located inside
// the document: never another exception, never a crash.
TEST(SpecJson, MutatedDocumentsReadOrFailCleanly) {
    const Tensor bias("bias", DType::f32, 4);
    const std::string valid = spec_to_json(AttentionSpec()
                                               .dtype(DType::bf16)
                                               .heads(8, 2)
                                               .scale(0.125)
                                               .score_mod(mods::compose(mods::softcap(scalar("cap")), mods::bias(bias)))
                                               .mask(mods::sliding_window(int_scalar("window"))));
    std::mt19937 rng(11);
    const std::string alphabet = "{}[]:,\"\\/*0123456789.-+eE truefalsnl\n\tu\x01\xc3\xa9";
    int errors = 0;
    for (int n = 0; n < 3000; ++n) {
        std::string doc = valid;
        for (int edits = 1 + n % 3; edits > 0; --edits) {
            const size_t at = rng() % doc.size();
            const char c = alphabet[rng() % alphabet.size()];
            switch (rng() % 3) {
            case 0: doc.erase(at, 1); break;
            case 1: doc.insert(at, 1, c); break;
            default: doc[at] = c; break;
            }
        }
        try {
            spec_from_json(doc);
        } catch (const SpecParseError& e) {
            ++errors;
            const int lines = 1 + static_cast<int>(std::count(doc.begin(), doc.end(), '\n'));
            EXPECT_GE(e.line(), 1);
            EXPECT_LE(e.line(), lines) << doc << "\n" << e.what();
            EXPECT_GE(e.column(), 1);
        } catch (const std::exception& other) {
            ADD_FAILURE() << doc << "\nthrew " << other.what();
        }
    }
    EXPECT_GT(errors, 1000);
}

TEST(SpecJson, DeepNestingIsAnErrorNotACrash) {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    const std::string doc = R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": 64, "scalars": )" + deep + "}";
    try {
        spec_from_json(doc);
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        EXPECT_EQ(e.column(), 73) << e.what();
        EXPECT_NE(std::string(e.what()).find("\"scalars\" is an object"), std::string::npos);
    }
}

}  // namespace
}  // namespace attnjit::dsl

namespace attnjit::dsl {
namespace {

// ---- attention sinks --------------------------------------------------------------------

std::string sinks_doc(const std::string& tensors, const std::string& sinks, const std::string& extra = "") {
    return "{\"format\": \"attnjit.spec/1\", \"dtype\": \"bf16\", \"head_dim\": 64, \"tensors\": {" + tensors + "}" +
           extra + (sinks.empty() ? "" : ", \"sinks\": " + sinks) + "}";
}

std::string parse_error(const std::string& doc) {
    try {
        spec_from_json(doc, "sinks.json");
    } catch (const UserError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(SpecJson, SinksRoundTripAndAreWrittenOnlyWhenPresent) {
    for (DType sd : {DType::f32, DType::f16, DType::bf16}) {
        AttentionSpec s = AttentionSpec().dtype(DType::f16).head_dim(64).mask(mods::causal()).sinks("sinks", sd);
        const std::string text = spec_to_json(s);
        EXPECT_NE(text.find("\"mask\": \"q_idx - kv_idx >= 0\",\n  \"sinks\": \"sinks\"\n}"), std::string::npos) << text;
        EXPECT_NE(text.find(std::string("\"sinks\": {\n      \"dtype\": \"") + dtype_name(sd)), std::string::npos)
            << text;
        const AttentionSpec back = spec_from_json(text);
        EXPECT_EQ(back, s);
        EXPECT_EQ(back.hash(), s.hash());
        EXPECT_EQ(spec_to_json(back), text);
    }
    EXPECT_EQ(spec_to_json(AttentionSpec()).find("sinks"), std::string::npos);
    // An expression may read the sinks tensor too (one captured tensor).
    const Tensor t("sinks", DType::f32, 1);
    AttentionSpec both = AttentionSpec().score_mod(score() + t(head())).sinks("sinks");
    EXPECT_EQ(spec_from_json(spec_to_json(both)), both);
    EXPECT_EQ(both.tensors().size(), 1u);
}

TEST(SpecJson, SinksErrorsNameTheProblem) {
    const std::string f32 = "\"sinks\": {\"dtype\": \"f32\", \"rank\": 1}";
    EXPECT_NE(spec_from_json(sinks_doc(f32, "\"sinks\"")).has_sinks(), false);
    EXPECT_TRUE(spec_from_json(sinks_doc("", "null")) == AttentionSpec().dtype(DType::bf16).head_dim(64));
    const std::pair<std::string, std::string> bad[] = {
        {sinks_doc(f32, "3"), "\"sinks\" is the name of a declared tensor of rank 1"},
        {sinks_doc("", "\"sinks\""), "names tensor \"sinks\", which is not declared under \"tensors\""},
        {sinks_doc("\"sinks\": {\"dtype\": \"i32\", \"rank\": 1}", "\"sinks\""), "declared as i32, rank 1"},
        {sinks_doc("\"sinks\": {\"dtype\": \"f32\", \"rank\": 2}", "\"sinks\""), "declared as f32, rank 2"},
        {sinks_doc(f32, ""), "tensor \"sinks\" is declared but nothing reads it"},
        {sinks_doc("\"sinks\": {\"dtype\": \"f32\", \"rank\": 2}", "\"sinks\"",
                   ", \"score_mod\": \"score + sinks[h, 0]\""),
         "declared as f32, rank 2"},
    };
    for (const auto& [doc, needle] : bad) {
        const std::string what = parse_error(doc);
        EXPECT_NE(what.find(needle), std::string::npos) << doc << "\n  -> " << what;
        EXPECT_NE(what.find("sinks.json:1:"), std::string::npos) << what;
    }
}

TEST(AttentionSpecSinks, ValidationHashAndPrinting) {
    const AttentionSpec base = AttentionSpec().dtype(DType::bf16).head_dim(64);
    AttentionSpec s = AttentionSpec(base).sinks("sinks");
    EXPECT_TRUE(s.has_sinks());
    EXPECT_EQ(s.tensors().at("sinks"), (TensorInfo{DType::f32, 1}));
    EXPECT_NE(s.hash(), base.hash());
    EXPECT_NE(s.hash(), AttentionSpec(base).sinks("sinks", DType::bf16).hash());
    EXPECT_NE(s.hash(), AttentionSpec(base).sinks("other").hash());
    EXPECT_EQ(AttentionSpec(s).no_sinks(), base);
    EXPECT_EQ(AttentionSpec(s).no_sinks().hash(), base.hash());
    std::ostringstream os;
    os << AttentionSpec(base).sinks("sinks", DType::f16);
    EXPECT_NE(os.str().find("sinks=sinks[f16]"), std::string::npos) << os.str();

    auto why = [](const AttentionSpec& spec) { return spec.why_invalid().value_or("(valid)"); };
    EXPECT_NE(why(AttentionSpec(base).sinks("2bad")).find("must be a C identifier"), std::string::npos);
    EXPECT_NE(why(AttentionSpec(base).sinks("s", DType::i32)).find("(f32, f16 or bf16)"), std::string::npos);
    const Tensor t2("s", DType::f32, 2);
    EXPECT_NE(why(AttentionSpec(base).score_mod(score() + t2(head(), 0)).sinks("s")).find("is the sinks tensor"),
              std::string::npos);
    EXPECT_NE(why(AttentionSpec(base).score_mod(score() * scalar("s")).sinks("s")).find("both as a scalar"),
              std::string::npos);
    EXPECT_THROW(AttentionSpec().sinks(""), UserError);
}

}  // namespace
}  // namespace attnjit::dsl
