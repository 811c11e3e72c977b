// The latent projection (MLA) in AttentionSpec (dsl/attention_spec.h) and in the JSON format
// (dsl/spec_json.h): builder, validation, hash and ==, printing, round trips, and located
// JSON errors.
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "dsl/dsl.h"
#include "dsl/spec_json.h"

namespace attnjit::dsl {
namespace {

const AttentionSpec kBase = AttentionSpec().dtype(DType::bf16).head_dims(192, 128);
const AttentionSpec kLatent = AttentionSpec(kBase).latent(512, "wq", "wv");

std::string why(const AttentionSpec& s) { return s.why_invalid().value_or("(valid)"); }

TEST(AttentionSpecLatent, BuilderTensorsScaleAndRemoval) {
    EXPECT_TRUE(kLatent.has_latent());
    EXPECT_EQ(kLatent.latent_dim(), 512);
    EXPECT_EQ(kLatent.latent_w_qlat(), "wq");
    EXPECT_EQ(kLatent.latent_w_vup(), "wv");
    EXPECT_EQ(why(kLatent), "(valid)");
    // Captured tensors of the spec's dtype, rank 3: [Hq, Dqk, L] and [Hq, L, Dv].
    EXPECT_EQ(kLatent.tensors().at("wq"), (TensorInfo{DType::bf16, 3}));
    EXPECT_EQ(kLatent.tensors().at("wv"), (TensorInfo{DType::bf16, 3}));
    EXPECT_EQ(AttentionSpec(kLatent).dtype(DType::f32).tensors().at("wv"), (TensorInfo{DType::f32, 3}));
    EXPECT_EQ(kLatent.tensors().size(), 2u);
    // The scores are dot products of width L: 1/sqrt(L) by default, an explicit scale wins.
    EXPECT_DOUBLE_EQ(kLatent.scale_or_default(), 1.0 / std::sqrt(512.0));
    EXPECT_DOUBLE_EQ(kBase.scale_or_default(), 1.0 / std::sqrt(192.0));
    EXPECT_DOUBLE_EQ(AttentionSpec(kLatent).scale(0.25).scale_or_default(), 0.25);
    EXPECT_FALSE(kBase.has_latent());
    EXPECT_EQ(kBase.latent_dim(), 0);
    EXPECT_EQ(kBase.latent_w_qlat(), "");
    EXPECT_EQ(kBase.latent_w_vup(), "");
    EXPECT_EQ(AttentionSpec(kLatent).no_latent(), kBase);
    EXPECT_EQ(AttentionSpec(kLatent).no_latent().hash(), kBase.hash());
    EXPECT_USER_ERROR(AttentionSpec().latent(64, "", "wv"),
                      "AttentionSpec.latent(64, \"\", \"wv\"): name both captured tensors, w_qlat [Hq, Dqk, L] and "
                      "w_vup [Hq, L, Dv], or call no_latent()");
    EXPECT_USER_ERROR(AttentionSpec().latent(64, "wq", ""), "AttentionSpec.latent(64, \"wq\", \"\"): name both");
}

TEST(AttentionSpecLatent, HashEqualityAndPrinting) {
    const AttentionSpec differ[] = {
        kBase,
        AttentionSpec(kBase).latent(256, "wq", "wv"),
        AttentionSpec(kBase).latent(512, "wq2", "wv"),
        AttentionSpec(kBase).latent(512, "wq", "wv2"),
        AttentionSpec(kBase).latent(512, "wv", "wq"),  // the same names, swapped
        AttentionSpec(kLatent).dtype(DType::f16),
    };
    for (const AttentionSpec& d : differ) {
        EXPECT_NE(d, kLatent) << d;
        EXPECT_NE(d.hash(), kLatent.hash()) << d;
    }
    const AttentionSpec same = AttentionSpec(kBase).latent(64, "a", "b").latent(512, "wq", "wv");  // the last call wins
    EXPECT_EQ(same, kLatent);
    EXPECT_EQ(same.hash(), kLatent.hash());
    std::ostringstream printed;
    printed << AttentionSpec(kLatent).reciprocal_band(4, "alpha");
    EXPECT_NE(printed.str().find(", reciprocal_band=alpha[W=4, causal], latent=512[wq, wv])"), std::string::npos)
        << printed.str();
    std::ostringstream plain;
    plain << kBase;
    EXPECT_EQ(plain.str().find("latent"), std::string::npos) << plain.str();
}

TEST(AttentionSpecLatent, ValidationNamesTheProblem) {
    const std::pair<AttentionSpec, std::string> bad[] = {
        {AttentionSpec(kBase).latent(512, "2wq", "wv"),
         "AttentionSpec.latent(512, \"2wq\", \"wv\"): the w_qlat tensor's name must be a C identifier that is not a "
         "built-in name"},
        {AttentionSpec(kBase).latent(512, "wq", "kv_idx"),
         "AttentionSpec.latent(512, \"wq\", \"kv_idx\"): the w_vup tensor's name must be a C identifier"},
        {AttentionSpec(kBase).latent(512, "w", "w"),
         "AttentionSpec.latent(512, \"w\", \"w\"): w_qlat [Hq, Dqk, L] and w_vup [Hq, L, Dv] are two different "
         "tensors; give them different names"},
        {AttentionSpec(kBase).latent(12, "wq", "wv"),
         "AttentionSpec.latent(12, \"wq\", \"wv\"): the latent dim L must be a multiple of 8 in [8, 512]"},
        {AttentionSpec(kBase).latent(520, "wq", "wv"), "the latent dim L must be a multiple of 8 in [8, 512]"},
        {AttentionSpec(kBase).latent(0, "wq", "wv"), "the latent dim L must be a multiple of 8 in [8, 512]"},
        {AttentionSpec(kBase).latent(-8, "wq", "wv"), "the latent dim L must be a multiple of 8 in [8, 512]"},
        {AttentionSpec(kLatent).heads(16, 2),
         "AttentionSpec.latent(512, \"wq\", \"wv\"): the latent K and V are one head shared by every query head, so "
         "kv_heads is 1 (or 0 to take it from the tensors), not 2; write heads(16, 1)"},
        {AttentionSpec(kLatent).heads(16, 16), "so kv_heads is 1 (or 0 to take it from the tensors), not 16"},
        {AttentionSpec(kLatent).score_conv("theta", 3, 3),
         "AttentionSpec.latent(512, \"wq\", \"wv\"): a latent projection and a score convolution cannot be combined"},
        {AttentionSpec(kLatent).gate("wq"),
         "tensor 'wq' is the latent w_qlat tensor (bf16, rank 3) but is also used as bf16/rank 4"},
        {AttentionSpec(kLatent).sinks("wv"), "tensor 'wv' is the latent w_vup tensor (bf16, rank 3) but is also used as f32/rank 1"},
        {AttentionSpec(kLatent).score_mod(score() + Tensor("wq", DType::f32, 3)(head(), 0, 0)),
         "tensor 'wq' is the latent w_qlat tensor (bf16, rank 3) but is also used as f32/rank 3"},
        {AttentionSpec(kLatent).score_mod(score() * scalar("wv")), "'wv' is used both as a scalar and as the latent w_vup tensor"},
    };
    for (const auto& [spec, needle] : bad) {
        EXPECT_NE(why(spec).find(needle), std::string::npos) << spec << "\n  -> " << why(spec);
        EXPECT_USER_ERROR(spec.validate(), needle);
    }
    // What is allowed: L at both ends, one KV head, the other features, and an expression that
    // reads a projection as the same tensor.
    for (const AttentionSpec& ok : {AttentionSpec(kBase).latent(8, "wq", "wv"), AttentionSpec(kLatent).heads(128, 1),
                                    AttentionSpec(kLatent).reciprocal_band(16, "alpha").gate("g").sinks("s"),
                                    AttentionSpec(kLatent).mask(mods::causal()).score_mod(
                                        score() + Tensor("wq", DType::bf16, 3)(head(), 0, 0))})
        EXPECT_EQ(why(ok), "(valid)") << ok;
}

// ---- JSON ----------------------------------------------------------------------------

void expect_round_trip(const AttentionSpec& spec) {
    const std::string json = spec_to_json(spec);
    const AttentionSpec back = spec_from_json(json);
    EXPECT_EQ(back, spec) << json;
    EXPECT_EQ(back.hash(), spec.hash()) << json;
    EXPECT_EQ(spec_to_json(back), json);
}

std::string doc(const std::string& tensors, const std::string& rest) {
    return "{\"format\": \"attnjit.spec/1\", \"dtype\": \"bf16\", \"head_dim_qk\": 192, \"head_dim_v\": 128, "
           "\"tensors\": {" + tensors + "}" + rest + "}";
}

std::string parse_error(const std::string& text) {
    try {
        spec_from_json(text, "s.json");
    } catch (const UserError& e) {
        return e.what();
    }
    return "(no error)";
}

const std::string kWeights = "\"wq\": {\"dtype\": \"bf16\", \"rank\": 3}, \"wv\": {\"dtype\": \"bf16\", \"rank\": 3}";
std::string latent(const std::string& body) { return ", \"latent\": {" + body + "}"; }

TEST(SpecJsonLatent, CanonicalFormAndRoundTrip) {
    const std::string json = spec_to_json(AttentionSpec(kLatent).reciprocal_band(4, "alpha"));
    EXPECT_NE(json.find(R"json(
  "reciprocal_band": {
    "width": 4,
    "alpha": "alpha",
    "causal": true
  },
  "latent": {
    "dim": 512,
    "w_qlat": "wq",
    "w_vup": "wv"
  }
}
)json"),
              std::string::npos)
        << json;
    EXPECT_NE(json.find("\"wq\": {\n      \"dtype\": \"bf16\",\n      \"rank\": 3\n    }"), std::string::npos) << json;
    expect_round_trip(kLatent);
    for (DType dt : {DType::f16, DType::f32}) expect_round_trip(AttentionSpec(kLatent).dtype(dt).heads(16, 1));
    expect_round_trip(AttentionSpec(kLatent).scale(0.1).mask(mods::causal()).gate("g").sinks("s").return_lse());
    expect_round_trip(AttentionSpec(kLatent).reciprocal_band(0, "alpha", false).score_mod(
        score() + Tensor("wv", DType::bf16, 3)(head(), 0, 1)));
    // Written only when present.
    EXPECT_EQ(spec_to_json(kBase).find("latent"), std::string::npos);
}

TEST(SpecJsonLatent, HandWrittenDocumentsAndNull) {
    EXPECT_EQ(spec_from_json(doc(kWeights, latent("\"w_vup\": \"wv\", \"dim\": 512, \"w_qlat\": \"wq\""))), kLatent);
    EXPECT_EQ(spec_from_json(doc(kWeights, latent("\"dim\": 64, \"w_qlat\": \"wv\", \"w_vup\": \"wq\""))),
              AttentionSpec(kBase).latent(64, "wv", "wq"));
    EXPECT_EQ(spec_from_json(doc("", ", \"latent\": null")), kBase);
    EXPECT_EQ(spec_from_json(doc(kWeights, ", \"kv_heads\": 1, \"q_heads\": 8" +
                                               latent("\"dim\": 512, \"w_qlat\": \"wq\", \"w_vup\": \"wv\""))),
              AttentionSpec(kLatent).heads(8, 1));
}

TEST(SpecJsonLatent, ErrorsNameTheProblem) {
    const std::string body = "\"dim\": 512, \"w_qlat\": \"wq\", \"w_vup\": \"wv\"";
    const std::string f32 = "\"wq\": {\"dtype\": \"f32\", \"rank\": 3}, \"wv\": {\"dtype\": \"bf16\", \"rank\": 3}";
    const std::string rank2 = "\"wq\": {\"dtype\": \"bf16\", \"rank\": 3}, \"wv\": {\"dtype\": \"bf16\", \"rank\": 2}";
    const std::pair<std::string, std::string> bad[] = {
        {doc(kWeights, latent(body + ", \"rope\": 64")), "unknown key \"rope\" in \"latent\"; expected dim, w_qlat, w_vup"},
        {doc(kWeights, latent("\"w_qlat\": \"wq\", \"w_vup\": \"wv\"")),
         "\"latent\" needs \"dim\" (keys: dim, w_qlat, w_vup)"},
        {doc(kWeights, latent("\"dim\": 512, \"w_vup\": \"wv\"")), "\"latent\" needs \"w_qlat\""},
        {doc(kWeights, latent("\"dim\": 512, \"w_qlat\": \"wq\"")), "\"latent\" needs \"w_vup\""},
        {doc(kWeights, ", \"latent\": 512"),
         "\"latent\" is {\"dim\": 512, \"w_qlat\": \"w_qlat\", \"w_vup\": \"w_vup\"} or null; found the number 512"},
        {doc(kWeights, ", \"latent\": [512]"), "\"latent\" is {\"dim\": 512, \"w_qlat\": \"w_qlat\", \"w_vup\": \"w_vup\"} "
                                               "or null; found an array"},
        {doc(kWeights, latent("\"dim\": 512, \"w_qlat\": 3, \"w_vup\": \"wv\"")),
         "\"w_qlat\" is the name of the projection tensor [Hq, Dqk, L]; found the number 3"},
        {doc(kWeights, latent("\"dim\": 512, \"w_qlat\": \"wq\", \"w_vup\": null")),
         "\"w_vup\" is the name of the projection tensor [Hq, L, Dv]; found null"},
        {doc("\"wv\": {\"dtype\": \"bf16\", \"rank\": 3}", latent(body)),
         "names tensor \"wq\", which is not declared under \"tensors\"; declare it: {\"dtype\": \"bf16\", \"rank\": 3}"},
        {doc("\"wq\": {\"dtype\": \"bf16\", \"rank\": 3}", latent(body)), "names tensor \"wv\", which is not declared"},
        {doc(f32, latent(body)),
         "the w_qlat tensor \"wq\" is declared as f32, rank 3; it is [Hq, Dqk, L] of the spec's dtype: "
         "{\"dtype\": \"bf16\", \"rank\": 3}"},
        {doc(rank2, latent(body)),
         "the w_vup tensor \"wv\" is declared as bf16, rank 2; it is [Hq, L, Dv] of the spec's dtype"},
        {doc(kWeights, latent("\"dim\": 512.0, \"w_qlat\": \"wq\", \"w_vup\": \"wv\"")),
         "\"dim\" must be an integer, found the number 512.0"},
        {doc(kWeights, latent("\"dim\": \"512\", \"w_qlat\": \"wq\", \"w_vup\": \"wv\"")),
         "\"dim\" must be an integer, found the string \"512\""},
        {doc(kWeights, latent("\"dim\": 100, \"w_qlat\": \"wq\", \"w_vup\": \"wv\"")),
         "\"latent\": the latent dim L must be a multiple of 8 in [8, 512]"},
        {doc(kWeights, latent("\"dim\": 1024, \"w_qlat\": \"wq\", \"w_vup\": \"wv\"")),
         "the latent dim L must be a multiple of 8 in [8, 512]"},
        {doc("\"w\": {\"dtype\": \"bf16\", \"rank\": 3}", latent("\"dim\": 512, \"w_qlat\": \"w\", \"w_vup\": \"w\"")),
         "\"latent\": w_qlat [Hq, Dqk, L] and w_vup [Hq, L, Dv] are two different tensors"},
        {doc(kWeights, ", \"q_heads\": 16, \"kv_heads\": 4" + latent(body)),
         "\"latent\": the latent K and V are one head shared by every query head, so kv_heads is 1"},
        {doc(kWeights + ", \"theta\": {\"dtype\": \"f32\", \"rank\": 3}",
             ", \"score_conv\": {\"tensor\": \"theta\", \"c_q\": 3, \"c_k\": 3}" + latent(body)),
         "\"latent\": a latent projection and a score convolution cannot be combined"},
        {doc(kWeights, ""), "tensor \"wq\" is declared but nothing reads it (score_mod, mask, sinks, gate, score_conv, "
                            "reciprocal_band, latent)"},
        {doc(kWeights, ", \"latnet\": null"), "unknown key \"latnet\"; did you mean \"latent\"?"},
    };
    for (const auto& [text, needle] : bad) {
        const std::string what = parse_error(text);
        EXPECT_NE(what.find(needle), std::string::npos) << text << "\n  -> " << what;
        EXPECT_NE(what.find("s.json:1:"), std::string::npos) << what;
    }
}

// Each error points at the value it concerns (the JSON pointer /latent/..., or /latent).
TEST(SpecJsonLatent, ErrorsPointAtTheirValue) {
    auto column_of = [](const std::string& text, const std::string& what) {
        return "s.json:1:" + std::to_string(text.find(what) + 1) + ":";
    };
    const std::string undeclared = doc("\"wq\": {\"dtype\": \"bf16\", \"rank\": 3}",
                                       latent("\"dim\": 512, \"w_qlat\": \"wq\", \"w_vup\": \"vv\""));
    EXPECT_NE(parse_error(undeclared).find(column_of(undeclared, "\"vv\"")), std::string::npos)
        << parse_error(undeclared);
    const std::string fraction = doc(kWeights, latent("\"dim\": 5.5, \"w_qlat\": \"wq\", \"w_vup\": \"wv\""));
    EXPECT_NE(parse_error(fraction).find(column_of(fraction, "5.5")), std::string::npos) << parse_error(fraction);
    const std::string unknown = doc(kWeights, latent("\"dim\": 512, \"w_qlat\": \"wq\", \"w_vup\": \"wv\", \"x\": 1"));
    EXPECT_NE(parse_error(unknown).find(column_of(unknown, "\"x\"")), std::string::npos) << parse_error(unknown);
    const std::string width = doc(kWeights, latent("\"dim\": 100, \"w_qlat\": \"wq\", \"w_vup\": \"wv\""));
    EXPECT_NE(parse_error(width).find(column_of(width, "{\"dim\"")), std::string::npos) << parse_error(width);
}

}  // namespace
}  // namespace attnjit::dsl
