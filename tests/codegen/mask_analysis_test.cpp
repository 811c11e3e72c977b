// Mask analysis against brute force: for random boxes, classify_box (the host twin of
// the generated classify(), same rules) must never say kSkip when some element of the
// box is kept, nor kFull when some is dropped (the oracle is dsl::interpret on the
// user's unsimplified mask). On the affine masks it must also be exact: a box strictly
// on one side of the diagonal is kSkip or kFull, never kPartial.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <random>

#include "codegen/classify_box.h"
#include "dsl/example_specs.h"
#include "codegen/generate.h"
#include "codegen/lower.h"
#include "codegen/mask_analysis.h"
#include "dsl/dsl.h"
#include "dsl/interpreter.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;
using mods::CausalAlign;

AttentionSpec with_mask(Expr m) { return AttentionSpec().dtype(DType::f16).head_dim(64).mask(std::move(m)); }

// Brute force over the box with the DSL interpreter.
struct Truth {
    bool any_kept = false, any_dropped = false;
};

Truth brute_force(const Expr& mask, const Box& box, const HostEnv& env) {
    Env e;
    e.b = env.b;
    e.h = env.h;
    e.kv_head = env.kv_head;
    e.q_len = env.q_len;
    e.kv_len = env.kv_len;
    e.scalars = env.scalars;
    e.load = [&](const std::string& name, const long long* idx, int rank) {
        const HostTensor& t = env.tensors.at(name);
        long long off = 0;
        for (int d = 0; d < rank; ++d) off += idx[d] * t.strides[d];
        return t.data.at(off);
    };
    Truth t;
    for (int q = box.q0; q <= box.q1; ++q)
        for (int k = box.k0; k <= box.k1; ++k) {
            e.q_idx = q;
            e.kv_idx = k;
            (interpret_bool(mask, e) ? t.any_kept : t.any_dropped) = true;
        }
    return t;
}

Box random_box(std::mt19937& rng, int nq, int nk) {
    auto side = [&](int n) {
        std::uniform_int_distribution<int> d(0, n - 1);
        int a = d(rng), b = d(rng);
        if (rng() % 3 == 0) b = std::min(n - 1, a + static_cast<int>(rng() % 16));  // small boxes too
        return std::make_pair(std::min(a, b), std::max(a, b));
    };
    auto [q0, q1] = side(nq);
    auto [k0, k1] = side(nk);
    return {q0, q1, k0, k1};
}

// Checks soundness on `boxes` random boxes; returns how many were classified exactly.
int check_sound(const AttentionSpec& spec, const HostEnv& env, int boxes, unsigned seed) {
    KernelPlan plan = lower(spec);
    std::mt19937 rng(seed);
    int exact = 0;
    for (int i = 0; i < boxes; ++i) {
        Box box = random_box(rng, env.q_len, env.kv_len);
        TileClass c = classify_box(plan, box, env);
        Truth t = brute_force(spec.mask(), box, env);
        SCOPED_TRACE(::testing::Message() << "box q [" << box.q0 << ", " << box.q1 << "] k [" << box.k0 << ", "
                                          << box.k1 << "], class " << c << ", mask " << spec.mask());
        if (c == TileClass::kSkip) {
            EXPECT_FALSE(t.any_kept) << "kSkip but an element is kept";
        }
        if (c == TileClass::kFull) {
            EXPECT_FALSE(t.any_dropped) << "kFull but an element is dropped";
        }
        TileClass truth = !t.any_kept ? TileClass::kSkip : !t.any_dropped ? TileClass::kFull : TileClass::kPartial;
        exact += c == truth;
        if (::testing::Test::HasFailure()) break;
    }
    return exact;
}

HostEnv lengths(int nq, int nk) {
    HostEnv env;
    env.q_len = nq;
    env.kv_len = nk;
    return env;
}

TEST(MaskAnalysis, CausalTopLeftIsSoundAndExact) {
    auto spec = with_mask(mods::causal());
    for (auto [nq, nk] : {std::pair{200, 200}, {77, 300}, {300, 50}})
        EXPECT_EQ(check_sound(spec, lengths(nq, nk), 400, 1), 400) << nq << "x" << nk;
}

TEST(MaskAnalysis, CausalBottomRightIsSoundAndExact) {
    auto spec = with_mask(mods::causal(CausalAlign::BottomRight));
    for (auto [nq, nk] : {std::pair{200, 200}, {7, 300}, {300, 50}})
        EXPECT_EQ(check_sound(spec, lengths(nq, nk), 400, 2), 400) << nq << "x" << nk;
}

TEST(MaskAnalysis, SlidingWindowIsSoundAndExact) {
    for (auto align : {CausalAlign::TopLeft, CausalAlign::BottomRight}) {
        auto spec = with_mask(mods::sliding_window(int_scalar("window"), align));
        HostEnv env = lengths(180, 240);
        for (int w : {1, 7, 64, 1000}) {
            env.scalars["window"] = w;
            // Exact: d = i - j appears twice but as one shared interval (CSE), and
            // 0 <= d < w over a contiguous integer interval is decided exactly.
            EXPECT_EQ(check_sound(spec, env, 400, 3 + w), 400) << "window " << w;
        }
        // A non-positive window keeps nothing; the analysis may only be conservative.
        env.scalars["window"] = 0;
        check_sound(spec, env, 200, 5);
    }
}

TEST(MaskAnalysis, PrefixLmIsSound) {
    auto spec = with_mask(mods::prefix_lm(int_scalar("prefix_len")));
    HostEnv env = lengths(160, 160);
    for (int prefix : {0, 10, 100, 200}) {
        env.scalars["prefix_len"] = prefix;
        check_sound(spec, env, 400, 11 + prefix);
    }
}

TEST(MaskAnalysis, PrefixLmExactCases) {
    KernelPlan plan = lower(with_mask(mods::prefix_lm(int_scalar("prefix_len"))));
    HostEnv env = lengths(256, 256);
    env.scalars["prefix_len"] = 64;
    EXPECT_EQ(classify_box(plan, {0, 15, 0, 63}, env), TileClass::kFull);      // inside the prefix
    EXPECT_EQ(classify_box(plan, {0, 15, 64, 127}, env), TileClass::kSkip);    // above the diagonal
    EXPECT_EQ(classify_box(plan, {128, 191, 64, 127}, env), TileClass::kFull); // below the diagonal
    EXPECT_EQ(classify_box(plan, {64, 127, 64, 127}, env), TileClass::kPartial);
}

HostEnv document_env(int n, std::vector<int> doc_lengths, int batches = 2) {
    HostEnv env = lengths(n, n);
    HostTensor doc;
    doc.strides = {n, 1};
    for (int b = 0; b < batches; ++b) {
        int id = 0, left = doc_lengths[0];
        for (int i = 0; i < n; ++i) {
            while (left == 0) left = doc_lengths[++id % doc_lengths.size()];
            doc.data.push_back(id + 100 * b);
            --left;
        }
        std::rotate(doc_lengths.begin(), doc_lengths.begin() + 1, doc_lengths.end());
    }
    env.tensors["doc_ids"] = doc;
    return env;
}

TEST(MaskAnalysis, DocumentMaskIsSoundAndSkipsOtherDocuments) {
    Tensor doc("doc_ids", DType::i32, 2);
    auto spec = with_mask(mods::document_mask(doc));
    HostEnv env = document_env(256, {40, 100, 16, 100});
    for (int b : {0, 1}) {
        env.b = b;
        check_sound(spec, env, 400, 21 + b);
    }
    KernelPlan plan = lower(spec);
    env.b = 0;  // documents [0, 40) [40, 140) [140, 156) [156, 256)
    EXPECT_EQ(classify_box(plan, {0, 31, 0, 31}, env), TileClass::kFull);
    EXPECT_EQ(classify_box(plan, {0, 31, 160, 191}, env), TileClass::kSkip);
    EXPECT_EQ(classify_box(plan, {32, 63, 0, 63}, env), TileClass::kPartial);
}

TEST(MaskAnalysis, I64IdsBeyondInt32AreReadTruncatedEverywhere) {
    // Document ids as i64 with values beyond 2^32: every reader (point loads, block
    // ranges, the interpreter) sees the int32 truncation, so ids 5 and 2^32 + 5 are one
    // document. Classification must match brute force over the truncated ids whatever
    // the box, and the tile ranges must agree with the point loads.
    const int n = 192;
    const long long two32 = 1LL << 32;
    // documents [0, 50) id 5, [50, 110) id 2^32 + 5 (truncates to 5), [110, 150) id
    // 2^33 + 9 (9), [150, 192) id 3 * 2^32 - 1 (-1); batch 1 reversed.
    auto id_at = [&](int i) -> long long {
        return i < 50 ? 5 : i < 110 ? two32 + 5 : i < 150 ? 2 * two32 + 9 : 3 * two32 - 1;
    };
    HostEnv wide = lengths(n, n), narrow = lengths(n, n);
    HostTensor w, t;
    w.strides = t.strides = {n, 1};
    for (int b = 0; b < 2; ++b)
        for (int i = 0; i < n; ++i) {
            const long long id = id_at(b == 0 ? i : n - 1 - i);
            w.data.push_back(static_cast<double>(id));
            t.data.push_back(static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(id))));
        }
    wide.tensors["doc_ids"] = w;
    narrow.tensors["doc_ids"] = t;
    Tensor doc("doc_ids", DType::i64, 2);
    for (const Expr& mask : {mods::document_mask(doc), doc(batch(), 0) == doc(batch(), kv_idx()),
                             doc(batch(), q_idx()) <= doc(batch(), kv_idx()) && mods::causal()}) {
        auto spec = with_mask(mask);
        KernelPlan plan = lower(spec);
        ASSERT_TRUE(plan.classify.can_classify) << mask;
        std::mt19937 rng(41);
        for (int b : {0, 1}) {
            wide.b = narrow.b = b;
            for (int i = 0; i < 300; ++i) {
                Box box = random_box(rng, n, n);
                SCOPED_TRACE(::testing::Message() << "b " << b << " box q [" << box.q0 << ", " << box.q1 << "] k ["
                                                  << box.k0 << ", " << box.k1 << "], mask " << mask);
                TileClass c = classify_box(plan, box, wide);
                ASSERT_EQ(c, classify_box(plan, box, narrow));
                Truth truth = brute_force(mask, box, narrow);
                Truth seen = brute_force(mask, box, wide);  // the interpreter truncates too
                ASSERT_EQ(truth.any_kept, seen.any_kept);
                ASSERT_EQ(truth.any_dropped, seen.any_dropped);
                if (c == TileClass::kSkip) {
                    ASSERT_FALSE(truth.any_kept);
                }
                if (c == TileClass::kFull) {
                    ASSERT_FALSE(truth.any_dropped);
                }
            }
        }
    }
    // Ids 5 and 2^32 + 5 are one document: the box across their boundary is kept whole.
    KernelPlan plan = lower(with_mask(mods::document_mask(doc)));
    wide.b = 0;
    EXPECT_EQ(classify_box(plan, {0, 31, 64, 95}, wide), TileClass::kFull);
    EXPECT_EQ(classify_box(plan, {0, 31, 112, 143}, wide), TileClass::kSkip);
}

TEST(MaskAnalysis, CombinedMasksStaySound) {
    Tensor doc("doc_ids", DType::i32, 2);
    auto spec = with_mask(mods::document_mask(doc) && mods::causal() && kv_idx() % 3 != 1);
    HostEnv env = document_env(128, {30, 50, 48});
    check_sound(spec, env, 300, 31);
    auto spec2 = with_mask(select(q_idx() > 50, kv_idx() * 2 <= q_idx(), abs(q_idx() - kv_idx()) < 5) ||
                           min(q_idx(), kv_idx()) / 7 == 3);
    check_sound(spec2, lengths(120, 140), 400, 32);
}

TEST(MaskAnalysis, StrictlyAboveOrBelowTheDiagonal) {
    KernelPlan tl = lower(with_mask(mods::causal()));
    HostEnv env = lengths(512, 512);
    EXPECT_EQ(classify_box(tl, {0, 63, 64, 127}, env), TileClass::kSkip);
    EXPECT_EQ(classify_box(tl, {128, 191, 0, 127}, env), TileClass::kFull);
    EXPECT_EQ(classify_box(tl, {64, 127, 64, 127}, env), TileClass::kPartial);
    KernelPlan br = lower(with_mask(mods::causal(CausalAlign::BottomRight)));
    env = lengths(64, 512);  // the last 64 keys hold the diagonal
    EXPECT_EQ(classify_box(br, {0, 63, 0, 447}, env), TileClass::kFull);
    EXPECT_EQ(classify_box(br, {0, 31, 480, 511}, env), TileClass::kSkip);
    EXPECT_EQ(classify_box(br, {0, 63, 448, 511}, env), TileClass::kPartial);
}

TEST(MaskAnalysis, CanClassifyOnlyWhenSomethingIsKnown) {
    Tensor bias("bias", DType::f32, 4);
    EXPECT_TRUE(lower(with_mask(mods::causal())).classify.can_classify);
    EXPECT_TRUE(lower(with_mask(mods::document_mask(Tensor("d", DType::i32, 2)))).classify.can_classify);
    // A float tensor indexed by both q and k: nothing is known over a tile.
    EXPECT_FALSE(lower(with_mask(bias(batch(), head(), q_idx(), kv_idx()) > 0.0)).classify.can_classify);
    // No mask at all: nothing to classify.
    EXPECT_FALSE(lower(AttentionSpec()).classify.can_classify);
}

TEST(MaskAnalysis, ConstantMasks) {
    KernelPlan keep = lower(with_mask(Expr(true) || q_idx() > 3));
    EXPECT_FALSE(keep.has_mask()) << "a mask that is constant true is no mask";
    KernelPlan all = lower(with_mask(Expr(2) < 3));
    EXPECT_FALSE(all.has_mask());
    KernelPlan none = lower(with_mask(Expr(3) < 2));
    ASSERT_TRUE(none.has_mask());
    EXPECT_TRUE(none.classify.can_classify);
    EXPECT_EQ(classify_box(none, {0, 10, 0, 10}, lengths(16, 16)), TileClass::kSkip);
}

TEST(MaskAnalysis, EmittedClassifyUsesTheBlockRangeHelper) {
    ClassifyCode c = mask_analysis(mods::document_mask(Tensor("doc", DType::i32, 2)), {});
    ASSERT_TRUE(c.can_classify);
    std::string body;
    for (const auto& l : c.lines) body += l + "\n";
    EXPECT_NE(body.find("ctx.int_range(p.tensor_doc.ptr + hd.b * p.tensor_doc.stride[0], p.tensor_doc.stride[1], q0, q1)"),
              std::string::npos)
        << body;
    EXPECT_NE(body.find("return attnjit::TileClass::kSkip;"), std::string::npos) << body;
}

// Names declared by `const <type> <name> = ...;` lines that no later line reads.
std::vector<std::string> unread_locals(const std::vector<std::string>& lines) {
    std::vector<std::string> unread;
    for (size_t i = 0; i < lines.size(); ++i) {
        const std::string& l = lines[i];
        if (l.rfind("const ", 0) != 0) continue;
        size_t eq = l.find(" = ");
        size_t sp = l.rfind(' ', eq - 1);
        std::string name = l.substr(sp + 1, eq - sp - 1);
        bool read = false;
        for (size_t j = i + 1; j < lines.size() && !read; ++j) {
            if (lines[j].rfind("//", 0) == 0) continue;
            for (size_t at = lines[j].find(name); at != std::string::npos; at = lines[j].find(name, at + 1)) {
                auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
                size_t end = at + name.size();
                if ((at == 0 || !ident(lines[j][at - 1])) && (end == lines[j].size() || !ident(lines[j][end]))) read = true;
            }
        }
        if (!read) unread.push_back(name);
    }
    return unread;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
}

TEST(MaskAnalysis, EmittedClassifyDeclaresOnlyWhatItReads) {
    std::vector<std::pair<std::string, AttentionSpec>> specs = example_specs();
    for (auto& m : modifier_specs()) specs.push_back(m);
    Tensor slopes("slopes", DType::f32, 1);
    Tensor doc("doc", DType::i32, 2);
    // A float comparison never proves "always true": the causal side's "may be false"
    // bounds are not needed, nor is anything when the mask is never true.
    specs.emplace_back("float_and_causal", with_mask(mods::causal() && slopes(head()) > 0.0));
    specs.emplace_back("never", with_mask(mods::causal() && q_idx() < 0));
    specs.emplace_back("doc_or_float", with_mask(mods::document_mask(doc) || slopes(head()) > 0.5));
    for (const auto& [name, spec] : specs) {
        KernelPlan plan = lower(spec);
        EXPECT_EQ(unread_locals(plan.classify.lines), std::vector<std::string>()) << name << ":\n"
                                                                                << joined(plan.classify.lines);
    }
    // What is kept still carries its DSL text, numbered as emitted.
    KernelPlan p = lower(with_mask(mods::causal() && slopes(head()) > 0.0));
    ASSERT_TRUE(p.classify.can_classify);
    EXPECT_EQ(joined(p.classify.lines),
              "// q_idx - kv_idx\n"
              "const long long i1 = (long long)q1 - k0;\n"
              "// q_idx - kv_idx >= 0\n"
              "const bool b2 = 0 <= i1;\n"
              "// slopes[h]\n"
              "const float f4 = attnjit::to_float(p.tensor_slopes.ptr[hd.h * p.tensor_slopes.stride[0]]);\n"
              "// slopes[h] > 0.0\n"
              "const bool b5 = 0.0f < f4;\n"
              "// q_idx - kv_idx >= 0 && slopes[h] > 0.0\n"
              "const bool b6 = b2 && b5;\n"
              "if (!b6) return attnjit::TileClass::kSkip;\n"
              "return attnjit::TileClass::kPartial;\n");
}

}  // namespace
}  // namespace attnjit::codegen
