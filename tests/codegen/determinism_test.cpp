// Same spec -> same bytes and the same content hash, whatever the order in which its
// scalars and tensors were declared; different specs -> different source and hash.
#include <gtest/gtest.h>

#include <set>

#include "dsl/example_specs.h"
#include "codegen/generate.h"
#include "common/forward_source.h"
#include "dsl/dsl.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

TEST(Determinism, SameSpecBuiltTwiceGivesIdenticalSource) {
    for (const auto& [name, spec] : example_specs(DType::bf16, 64)) {
        SCOPED_TRACE(name);
        const auto again = example_spec(name, DType::bf16, 64);
        KernelSource a = testing::forward_source(spec), b = testing::forward_source(again);
        EXPECT_EQ(a.source, b.source);
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.content_hash(), b.content_hash());
    }
}

// Built with the tensors and scalars declared and combined in different orders.
AttentionSpec built(bool reversed) {
    if (!reversed) {
        Tensor bias("bias", DType::f16, 4);
        Tensor slopes("slopes", DType::f32, 1);
        Expr cap = scalar("cap");
        Expr window = int_scalar("window");
        Expr sm = mods::softcap(cap);
        sm = mods::compose(sm, mods::alibi(slopes));
        sm = mods::compose(sm, mods::bias(bias));
        return AttentionSpec().head_dim(128).score_mod(sm).mask(mods::sliding_window(window));
    }
    Expr window = int_scalar("window");
    Expr cap = scalar("cap");
    Tensor slopes("slopes", DType::f32, 1);
    Tensor bias("bias", DType::f16, 4);
    AttentionSpec s;
    s.mask(mods::sliding_window(window)).head_dim(128);
    Expr inner = mods::compose(mods::alibi(slopes), mods::bias(bias));
    return s.score_mod(mods::compose(mods::softcap(cap), inner));
}

TEST(Determinism, DeclarationOrderDoesNotMatter) {
    KernelSource a = testing::forward_source(built(false)), b = testing::forward_source(built(true));
    EXPECT_EQ(a.source, b.source);
    EXPECT_EQ(a.content_hash(), b.content_hash());
    const ParamsLayout la = params_layout(built(false), KernelKind::forward), lb = params_layout(built(true), KernelKind::forward);
    ASSERT_EQ(la.fields.size(), lb.fields.size());
    for (size_t i = 0; i < la.fields.size(); ++i) {
        EXPECT_EQ(la.fields[i].c_name, lb.fields[i].c_name);
        EXPECT_EQ(la.fields[i].offset, lb.fields[i].offset);
    }
}

TEST(Determinism, DifferentSpecsGiveDifferentSourceAndHash) {
    std::set<std::string> sources, hashes, names;
    size_t n = 0;
    for (DType d : {DType::f16, DType::bf16, DType::f32})
        for (int hd : {64, 128})
            for (const auto& [name, spec] : example_specs(d, hd)) {
                KernelSource k = testing::forward_source(spec);
                sources.insert(k.source);
                hashes.insert(k.content_hash());
                names.insert(k.name);
                ++n;
            }
    EXPECT_EQ(sources.size(), n);
    EXPECT_EQ(hashes.size(), n);
    EXPECT_EQ(names.size(), n);
    // A different tile of the same spec is a different kernel too.
    auto spec = example_spec("causal");
    EXPECT_NE(testing::forward_source(spec, TileConfig{64, 64, 4, 2}).content_hash(),
              testing::forward_source(spec, TileConfig{128, 64, 4, 2}).content_hash());
}

TEST(Determinism, SourceHoldsNoPointerValues) {
    for (const auto& [name, spec] : example_specs()) {
        std::string src = testing::forward_source(spec).source;
        EXPECT_EQ(src.find("0x7f"), src.find("0x7f800000u")) << name;  // only the inf literal, if any
        EXPECT_EQ(src.find("0x55"), std::string::npos) << name;
    }
}

}  // namespace
}  // namespace attnjit::codegen
