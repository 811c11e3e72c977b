// Structural equality and the deterministic hash the kernel cache key depends on.
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "dsl/dsl.h"

namespace attnjit::dsl {
namespace {

AttentionSpec base() {
    Tensor bias("bias", DType::bf16, 4);
    return AttentionSpec()
        .dtype(DType::bf16)
        .head_dim(128)
        .heads(8, 2)
        .score_mod(mods::compose(mods::softcap(scalar("cap")), mods::bias(bias)))
        .mask(mods::causal());
}

TEST(Equality, ExpressionsCompareByStructure) {
    EXPECT_TRUE(equal(score() + 1.0, score() + 1.0));
    EXPECT_FALSE(equal(score() + 1.0, score() + 2.0));
    EXPECT_FALSE(equal(score() + 1.0, 1.0 + score()));  // no canonicalisation here
    EXPECT_FALSE(equal(Expr(1), Expr(1.0)));             // types differ
    EXPECT_FALSE(equal(Expr(0.0), Expr(-0.0)));          // bitwise for floats
    EXPECT_TRUE(equal(Expr(std::nan("")), Expr(std::nan(""))));
    EXPECT_FALSE(equal(q_idx(), kv_idx()));
    EXPECT_FALSE(equal(scalar("x"), scalar("y")));
    EXPECT_FALSE(equal(scalar("x"), int_scalar("x")));
    EXPECT_FALSE(equal(Tensor("t", DType::f16, 1)(q_idx()), Tensor("t", DType::f32, 1)(q_idx())));
    EXPECT_FALSE(equal(Tensor("t", DType::f16, 1)(q_idx()), Tensor("t", DType::f16, 1)(kv_idx())));
    EXPECT_FALSE(equal(exp(score()), log(score())));
    EXPECT_FALSE(equal(select(q_idx() < 1, 1, 2), select(q_idx() < 1, 2, 1)));
    EXPECT_TRUE(equal(Expr(), Expr()));
    EXPECT_FALSE(equal(Expr(), score()));
}

TEST(Hash, EqualExpressionsHashEqual) {
    Expr a = mods::relative_position_bias(Tensor("table", DType::f32, 2), 16);
    Expr b = mods::relative_position_bias(Tensor("table", DType::f32, 2), 16);
    EXPECT_TRUE(equal(a, b));
    EXPECT_EQ(structural_hash(a), structural_hash(b));
    EXPECT_NE(structural_hash(a), structural_hash(mods::relative_position_bias(Tensor("table", DType::f32, 2), 8)));
}

TEST(Hash, DistinctSmallExpressionsHashDistinct) {
    std::vector<Expr> all = {score(), q_idx(), kv_idx(), batch(), head(), kv_head(), q_len(), kv_len(),
                             Expr(0), Expr(1), Expr(0.0), Expr(-0.0), Expr(1.0), Expr(true), Expr(false),
                             q_idx() + kv_idx(), kv_idx() + q_idx(), q_idx() - kv_idx(), q_idx() * kv_idx(),
                             q_idx() < kv_idx(), q_idx() <= kv_idx(), -q_idx(), abs(q_idx()),
                             to_float(q_idx()), scalar("x"), int_scalar("x"), scalar("y"), exp(score()),
                             exp2(score()), Tensor("t", DType::f32, 1)(q_idx())};
    std::set<uint64_t> hashes;
    for (const Expr& e : all) hashes.insert(structural_hash(e));
    EXPECT_EQ(hashes.size(), all.size());
}

TEST(Hash, EqualSpecsHashEqualAcrossConstructions) {
    AttentionSpec a = base(), b = base();
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.hash(), b.hash());
    // Built in another order (and with other allocations in between): same hash.
    std::vector<Expr> noise(100, score() * 3.0);
    AttentionSpec c;
    c.mask(mods::causal()).heads(8, 2).head_dim(128);
    c.score_mod(mods::compose(mods::softcap(scalar("cap")), mods::bias(Tensor("bias", DType::bf16, 4))));
    c.dtype(DType::bf16);
    EXPECT_EQ(a, c);
    EXPECT_EQ(a.hash(), c.hash());
    AttentionSpec d = a;  // copies share nodes and hash the same
    EXPECT_EQ(d.hash(), a.hash());
}

TEST(Hash, AnyFieldChangeChangesTheHash) {
    const AttentionSpec a = base();
    std::vector<std::pair<std::string, AttentionSpec>> changed = {
        {"dtype", AttentionSpec(a).dtype(DType::f16)},
        {"head_dim_qk", AttentionSpec(a).head_dims(64, 128)},
        {"head_dim_v", AttentionSpec(a).head_dims(128, 64)},
        {"q_heads", AttentionSpec(a).heads(16, 2)},
        {"kv_heads", AttentionSpec(a).heads(8, 4)},
        {"scale set", AttentionSpec(a).scale(1.0 / std::sqrt(128.0))},
        {"scale value", AttentionSpec(a).scale(0.5)},
        {"score_mod", AttentionSpec(a).score_mod(mods::softcap(scalar("cap")))},
        {"score_mod removed", AttentionSpec(a).score_mod(Expr())},
        {"mask", AttentionSpec(a).mask(mods::causal(mods::CausalAlign::BottomRight))},
        {"mask removed", AttentionSpec(a).mask(Expr())},
        {"return_lse", AttentionSpec(a).return_lse()},
        {"tensor dtype", AttentionSpec(a).score_mod(mods::compose(mods::softcap(scalar("cap")),
                                                                  mods::bias(Tensor("bias", DType::f32, 4))))},
        {"scalar name", AttentionSpec(a).score_mod(mods::compose(mods::softcap(scalar("cap2")),
                                                                 mods::bias(Tensor("bias", DType::bf16, 4))))},
    };
    std::set<uint64_t> hashes = {a.hash()};
    for (const auto& [what, s] : changed) {
        EXPECT_NE(s, a) << what;
        EXPECT_NE(s.hash(), a.hash()) << what;
        hashes.insert(s.hash());
    }
    EXPECT_EQ(hashes.size(), changed.size() + 1) << "two different changes collided";
    // The same scale given explicitly as scale_or_default is still a different spec: the
    // value is a runtime argument either way, but the spec records whether it was set.
    EXPECT_EQ(AttentionSpec(a).scale(0.5).scale_or_default(), 0.5);
}

TEST(Hash, CombinatorsAreDeterministic) {
    EXPECT_EQ(hash_string("abc"), hash_string("abc"));
    EXPECT_NE(hash_string("abc"), hash_string("abd"));
    EXPECT_NE(hash_combine(1, 2), hash_combine(2, 1));
}

}  // namespace
}  // namespace attnjit::dsl
