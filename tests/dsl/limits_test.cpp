// The limits of dsl/limits.h (docs/spec_format.md, "Limits") and the int32 rule for
// constants: hostile specs are UserErrors, never crashes; the largest allowed spec goes
// through every stage on a small thread stack; folding and interval analysis never
// overflow (these tests are also run under the sanitizers, scripts/sanitize.sh).
#include <pthread.h>

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "../common/expect_error.h"
#include "codegen/classify_box.h"
#include "../common/forward_source.h"
#include "codegen/generate.h"
#include "codegen/lower.h"
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "dsl/limits.h"
#include "dsl/parser.h"
#include "dsl/spec_json.h"

namespace attnjit::dsl {
namespace {

std::string spec_json(const std::string& key, const std::string& expr, const std::string& extra = "") {
    return R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": 64, )" + extra + "\"" + key + "\": \"" + expr +
           "\"}";
}

// "q_idx + q_idx + ... " with `terms` terms joined by `op`.
std::string chain(const std::string& term, const std::string& op, int terms) {
    std::string s = term;
    for (int i = 1; i < terms; ++i) s += " " + op + " " + term;
    return s;
}

// The stack the deepest spec is tested on: 1 MiB, and 4 MiB under AddressSanitizer,
// whose redzones make every frame several times larger.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kTestStack = size_t(4) << 20;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr size_t kTestStack = size_t(4) << 20;
#else
constexpr size_t kTestStack = size_t(1) << 20;
#endif
#else
constexpr size_t kTestStack = size_t(1) << 20;
#endif

// Runs f on a thread with a stack of `bytes` (the main thread's 8 MB would hide a
// recursion that is merely bounded, not small).
void run_with_stack(size_t bytes, const std::function<void()>& f) {
    struct Call {
        const std::function<void()>* f;
        std::exception_ptr error;
    } call{&f, nullptr};
    pthread_attr_t attr;
    ASSERT_EQ(pthread_attr_init(&attr), 0);
    ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
    pthread_t thread;
    auto body = [](void* p) -> void* {
        auto* c = static_cast<Call*>(p);
        try {
            (*c->f)();
        } catch (...) {
            c->error = std::current_exception();
        }
        return nullptr;
    };
    ASSERT_EQ(pthread_create(&thread, &attr, body, &call), 0);
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
    if (call.error) std::rethrow_exception(call.error);
}

TEST(Limits, LongOperatorChainsInADocumentAreLocatedUserErrors) {
    // Before the limit, generation overflowed the stack at ~7,100 terms and the reader at
    // ~262,000; now the first term past the depth limit is reported where it stands.
    for (const auto& [key, term, op] : {std::tuple<std::string, std::string, std::string>{"score_mod", "score", "+"},
                                        {"score_mod", "score", "*"},
                                        {"mask", "q_idx > kv_idx", "&&"},
                                        {"mask", "q_idx > kv_idx", "||"}}) {
        for (int terms : {kMaxExprDepth + 1, 30000}) {
            try {
                spec_from_json(spec_json(key, chain(term, op, terms)));
                ADD_FAILURE() << terms << " terms of " << op << " were accepted";
            } catch (const SpecParseError& e) {
                EXPECT_NE(std::string(e.what()).find("the expression is too deep"), std::string::npos) << e.what();
                EXPECT_EQ(e.line(), 1);
                EXPECT_GT(e.column(), 50);
            }
        }
    }
}

TEST(Limits, LongChainsInTheCppBuilderAreUserErrors) {
    Expr e = score();
    int built = 1;
    try {
        for (; built < 100000; ++built) e = e + score();
    } catch (const UserError& err) {
        EXPECT_NE(std::string(err.what()).find("the limit is 256"), std::string::npos) << err.what();
    }
    EXPECT_EQ(built, kMaxExprDepth) << "the chain stops at the limit (a + b has depth 2)";
    EXPECT_EQ(e->depth, kMaxExprDepth);
    EXPECT_USER_ERROR(Expr(q_idx() < kv_idx()) && (e > 0.0), "too deep");
}

TEST(Limits, SharedSubexpressionsCountAtEachUse) {
    Expr e = score();
    int doublings = 0;
    try {
        for (; doublings < 64; ++doublings) e = e + e;  // 2^64 nodes printed if allowed
    } catch (const UserError& err) {
        EXPECT_NE(std::string(err.what()).find("too large"), std::string::npos) << err.what();
        EXPECT_NE(std::string(err.what()).find("4096"), std::string::npos) << err.what();
    }
    EXPECT_EQ(doublings, 11) << "2^12 - 1 nodes fit, 2^13 - 1 do not";
    EXPECT_EQ(e->size, 4095u);
}

TEST(Limits, ASpecOfNodesMadeDirectlyIsCheckedToo) {
    Expr e = score();
    for (int i = 0; i < kMaxExprDepth; ++i) e = Unary::make(UnaryOp::Tanh, e);  // no operator checks
    EXPECT_USER_ERROR(AttentionSpec().head_dim(64).score_mod(e).validate(), "score_mod: attnjit: the expression is too deep");
}

TEST(Limits, TheLargestAllowedSpecGoesThroughEveryStageOnASmallStack) {
    // A chain exactly at the depth limit in both expressions, read from JSON, printed,
    // read again, hashed, interpreted, lowered and generated, on a 1 MiB stack.
    // (Measured: it passes on 512 KiB too, so the 1 MiB claim of the docs has room.)
    const std::string score_text = chain("score", "+", kMaxExprDepth - 2) + " * 0.5";
    const std::string mask_text = chain("q_idx >= kv_idx", "&&", kMaxExprDepth / 3);
    const std::string doc = R"({"format": "attnjit.spec/1", "dtype": "f16", "head_dim": 64, "score_mod": ")" +
                            score_text + R"(", "mask": ")" + mask_text + "\"}";
    run_with_stack(kTestStack, [&] {
        AttentionSpec spec = spec_from_json(doc);
        EXPECT_LE(spec.score_mod()->depth, kMaxExprDepth);
        AttentionSpec again = spec_from_json(spec_to_json(spec));
        EXPECT_EQ(again.hash(), spec.hash());
        Env env;
        env.score = 1.0;
        EXPECT_DOUBLE_EQ(interpret_float(spec.score_mod(), env), kMaxExprDepth - 3 + 0.5);
        env.q_idx = 3;
        env.kv_idx = 2;
        EXPECT_TRUE(interpret_bool(spec.mask(), env));
        codegen::KernelSource source = testing::forward_source(spec);
        EXPECT_NE(source.source.find("classify"), std::string::npos);
        // The printed form of the deepest tree nests two levels a node, !(...): it reads back.
        Expr nots = q_idx() >= kv_idx();
        for (int i = 2; i < kMaxExprDepth; ++i) nots = Unary::make(UnaryOp::Not, nots);
        ASSERT_EQ(nots->depth, kMaxExprDepth);
        const std::string printed = to_string(nots);
        EXPECT_TRUE(equal(parse_expr(printed, {}), nots));
        EXPECT_EQ(spec_to_json(spec_from_json(spec_json("mask", printed))), spec_to_json(AttentionSpec().head_dim(64).dtype(DType::f16).mask(nots)));
    });
}

TEST(Limits, DocumentSizeIsCheckedBeforeParsing) {
    const std::string big = spec_json("score_mod", "score" + std::string(kMaxSpecDocumentBytes, ' '));
    try {
        spec_from_json(big);
        ADD_FAILURE() << "a document over the limit was accepted";
    } catch (const SpecParseError& e) {
        EXPECT_NE(std::string(e.what()).find("the limit is 1048576"), std::string::npos) << e.what();
    }
    EXPECT_USER_ERROR(parse_expr(std::string(kMaxSpecDocumentBytes + 1, ' '), {}), "the limit is 1048576");
}

std::string declarations(const char* kind, int n, const std::string& value) {
    std::string s = std::string("\"") + kind + "\": {";
    for (int i = 0; i < n; ++i) s += (i ? ", \"" : "\"") + std::string(kind).substr(0, 1) + std::to_string(i) + "\": " + value;
    return s + "}, ";
}

TEST(Limits, CapturedTensorsAndScalarsAreCounted) {
    // 300 tensors took 63 s of NVRTC before the limit.
    EXPECT_USER_ERROR(
        spec_from_json(spec_json("score_mod", "score", declarations("tensors", kMaxCapturedTensors + 1,
                                                                    R"({"dtype": "f32", "rank": 1})"))),
        "declares 33 captured tensors, and the limit is 32");
    EXPECT_USER_ERROR(
        spec_from_json(spec_json("score_mod", "score", declarations("scalars", kMaxRuntimeScalars + 1, "\"float\""))),
        "declares 33 runtime scalars, and the limit is 32");
    // The same limits for a spec built in C++.
    Expr sum = score(), scalars = score();
    for (int i = 0; i <= kMaxCapturedTensors; ++i) sum = sum + Tensor("t" + std::to_string(i), DType::f32, 1)({head()});
    for (int i = 0; i <= kMaxRuntimeScalars; ++i) scalars = scalars + scalar("s" + std::to_string(i));
    EXPECT_USER_ERROR(AttentionSpec().head_dim(64).score_mod(sum).validate(), "33 captured tensors");
    EXPECT_USER_ERROR(AttentionSpec().head_dim(64).score_mod(scalars).validate(), "33 runtime scalars");
    // At the limit, fine.
    Expr at_limit = score();
    for (int i = 0; i < kMaxCapturedTensors; ++i) at_limit = at_limit + Tensor("t" + std::to_string(i), DType::f32, 1)({head()});
    EXPECT_NO_THROW(AttentionSpec().head_dim(64).score_mod(at_limit).validate());
}

TEST(Limits, IntConstantsAreInt32) {
    EXPECT_USER_ERROR(Expr(2147483648LL), "int constant 2147483648 is out of range: ints are int32");
    EXPECT_USER_ERROR(Expr(-2147483649LL), "out of range");
    EXPECT_EQ(Expr(-2147483647LL - 1).as<Const>()->i, -2147483648LL);
    // The issue's specs: each literal is a located parse error, not a NVRTC failure or a crash.
    for (const char* mask : {"max(q_idx, 2147483648) > kv_idx", "abs(-9223372036854775808) > q_idx",
                             "q_idx < -9223372036854775808 / -1", "q_idx + 9223372036854775807 > 0"}) {
        try {
            spec_from_json(spec_json("mask", mask));
            ADD_FAILURE() << mask << " was accepted";
        } catch (const SpecParseError& e) {
            EXPECT_NE(std::string(e.what()).find("is out of range: ints are int32"), std::string::npos) << e.what();
        }
    }
}

// Folding and interval analysis of int32 edges: no UB (the sanitizer job stops at any),
// and an operation whose int32 result would overflow is left to the GPU, not folded into
// a constant that does not exist there. (What such a mask means is undefined, as in C:
// docs/semantics.md; only the absence of host UB is checked here.)
TEST(Limits, FoldingAndIntervalsAtTheInt32EdgesNeverOverflow) {
    const char* masks[] = {
        "q_idx < -2147483648 / -1",
        "q_idx < -2147483648 % -1 + kv_idx",
        "q_idx + 2147483647 + 2147483647 > 0",
        "65536 * 65536 > q_idx",
        "-(-2147483648) > q_idx",
        "abs(-2147483648) > kv_idx",
        "q_idx * 2147483647 * 2147483647 > kv_idx",
        "(q_idx - kv_idx) * (q_idx - kv_idx) * (q_idx - kv_idx) * 65536 < 2147483647",
        "-(q_idx * -2147483648) * 2147483647 - 2147483647 - 2147483647 < kv_idx",
    };
    for (const char* mask : masks) {
        SCOPED_TRACE(mask);
        AttentionSpec spec = spec_from_json(spec_json("mask", mask));
        codegen::KernelPlan plan = codegen::lower(spec);
        EXPECT_NO_THROW(testing::forward_source(spec));
        codegen::HostEnv env;
        env.q_len = env.kv_len = 1 << 20;
        for (codegen::Box box : {codegen::Box{0, 63, 0, 63}, codegen::Box{0, (1 << 20) - 1, 0, (1 << 20) - 1}})
            EXPECT_NO_THROW(codegen::classify_box(plan, box, env));
    }
    // Not folded: the int32 result does not exist.
    EXPECT_NE(testing::forward_source(spec_from_json(spec_json("mask", "65536 * 65536 > q_idx"))).source.find("65536"),
              std::string::npos);
}

}  // namespace
}  // namespace attnjit::dsl
