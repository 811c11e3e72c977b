// The output gate, the score convolution and the reciprocal band in AttentionSpec (dsl/attention_spec.h) and in
// the JSON format (dsl/spec_json.h): builder, validation, hash and ==, printing, round
// trips, and located JSON errors.
#include <sstream>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "dsl/dsl.h"
#include "dsl/spec_json.h"

namespace attnjit::dsl {
namespace {

const AttentionSpec kBase = AttentionSpec().dtype(DType::bf16).head_dim(64);

std::string why(const AttentionSpec& s) { return s.why_invalid().value_or("(valid)"); }

TEST(AttentionSpecGate, BuilderTensorsAndRemoval) {
    const AttentionSpec s = AttentionSpec(kBase).gate("g");
    EXPECT_TRUE(s.has_gate());
    EXPECT_EQ(s.gate_name(), "g");
    EXPECT_EQ(s.tensors().at("g"), (TensorInfo{DType::bf16, 4}));  // the spec's dtype, [B, Hq, Nq, Dv]
    EXPECT_EQ(AttentionSpec(s).dtype(DType::f16).tensors().at("g"), (TensorInfo{DType::f16, 4}));
    EXPECT_EQ(why(s), "(valid)");
    EXPECT_FALSE(kBase.has_gate());
    EXPECT_EQ(kBase.gate_name(), "");
    EXPECT_EQ(AttentionSpec(s).no_gate(), kBase);
    EXPECT_EQ(AttentionSpec(s).no_gate().hash(), kBase.hash());
    EXPECT_USER_ERROR(AttentionSpec().gate(""), "AttentionSpec.gate(\"\"): name the captured tensor");
}

TEST(AttentionSpecScoreConv, BuilderTensorsAndRemoval) {
    const AttentionSpec s = AttentionSpec(kBase).score_conv("theta", 6, 11);
    EXPECT_TRUE(s.has_score_conv());
    EXPECT_EQ(s.score_conv_name(), "theta");
    EXPECT_EQ(s.score_conv_rows(), 6);
    EXPECT_EQ(s.score_conv_cols(), 11);
    EXPECT_EQ(s.score_conv_dtype(), DType::f32);  // the default
    EXPECT_EQ(s.tensors().at("theta"), (TensorInfo{DType::f32, 3}));
    EXPECT_EQ(AttentionSpec(kBase).score_conv("theta", 1, 1, DType::bf16).tensors().at("theta"),
              (TensorInfo{DType::bf16, 3}));
    EXPECT_EQ(why(s), "(valid)");
    EXPECT_EQ(kBase.score_conv_rows(), 0);
    EXPECT_EQ(AttentionSpec(s).no_score_conv(), kBase);
    EXPECT_EQ(AttentionSpec(s).no_score_conv().hash(), kBase.hash());
    EXPECT_USER_ERROR(AttentionSpec().score_conv("", 6, 11), "AttentionSpec.score_conv(\"\", 6, 11): name");
}

TEST(AttentionSpecScoreConv, ValidationNamesTheProblem) {
    const std::pair<AttentionSpec, std::string> bad[] = {
        {AttentionSpec(kBase).score_conv("theta", 6, 10), "c_k (key extent) must be odd and in [1, 15]"},
        {AttentionSpec(kBase).score_conv("theta", 6, 17), "c_k (key extent) must be odd and in [1, 15]"},
        {AttentionSpec(kBase).score_conv("theta", 6, 0), "c_k (key extent) must be odd"},
        {AttentionSpec(kBase).score_conv("theta", 6, -1), "c_k (key extent) must be odd"},
        {AttentionSpec(kBase).score_conv("theta", 0, 11), "c_q (query extent) must be in [1, 8]"},
        {AttentionSpec(kBase).score_conv("theta", 9, 11), "c_q (query extent) must be in [1, 8]"},
        {AttentionSpec(kBase).score_conv("2theta", 6, 11), "the kernel tensor's name must be a C identifier"},
        {AttentionSpec(kBase).score_conv("score", 6, 11), "not a built-in name"},
        {AttentionSpec(kBase).score_conv("theta", 6, 11, DType::i32), "(f32, f16 or bf16), not i32"},
        {AttentionSpec(kBase).score_conv("theta", 6, 11).score_mod(score() * scalar("theta")),
         "'theta' is used both as a scalar and as the score_conv tensor"},
        {AttentionSpec(kBase).score_conv("theta", 6, 11).score_mod(score() + Tensor("theta", DType::f32, 2)(head(), 0)),
         "tensor 'theta' is the score_conv tensor (f32, rank 3) but is also used as f32/rank 2"},
        {AttentionSpec(kBase).score_conv("theta", 6, 11).score_mod(
             score() + Tensor("theta", DType::f16, 3)(head(), 0, 0)),
         "tensor 'theta' is the score_conv tensor (f32, rank 3) but is also used as f16/rank 3"},
        {AttentionSpec(kBase).gate("x").score_conv("x", 3, 3), "tensor 'x' is the score_conv tensor"},
        {AttentionSpec(kBase).sinks("x").score_conv("x", 3, 3), "tensor 'x' is the score_conv tensor"},
    };
    for (const auto& [spec, needle] : bad) {
        EXPECT_NE(why(spec).find(needle), std::string::npos) << spec << "\n  -> " << why(spec);
        EXPECT_USER_ERROR(spec.validate(), needle);
    }
    // The largest kernel fits; an expression may read the kernel as the same tensor.
    EXPECT_EQ(why(AttentionSpec(kBase).score_conv("theta", 8, 15)), "(valid)");
    const AttentionSpec shared = AttentionSpec(kBase).score_conv("theta", 3, 3).score_mod(
        score() + Tensor("theta", DType::f32, 3)(head(), 0, 0));
    EXPECT_EQ(why(shared), "(valid)");
    EXPECT_EQ(shared.tensors().size(), 1u);
}

TEST(AttentionSpecGate, ValidationNamesTheProblem) {
    EXPECT_NE(why(AttentionSpec(kBase).gate("2g")).find("the gate tensor's name must be a C identifier"),
              std::string::npos);
    EXPECT_NE(why(AttentionSpec(kBase).gate("q_idx")).find("not a built-in name"), std::string::npos);
    EXPECT_NE(why(AttentionSpec(kBase).gate("g").score_mod(score() * scalar("g"))).find(
                  "'g' is used both as a scalar and as the gate tensor"),
              std::string::npos);
    // Read by score_mod with another rank or dtype than the gate's ([B, Hq, Nq, Dv], bf16).
    EXPECT_NE(why(AttentionSpec(kBase).gate("g").score_mod(score() + Tensor("g", DType::bf16, 2)(head(), 0))).find(
                  "tensor 'g' is the gate tensor (bf16, rank 4) but is also used as bf16/rank 2"),
              std::string::npos);
    EXPECT_NE(why(AttentionSpec(kBase).gate("g").score_mod(
                      score() + Tensor("g", DType::f32, 4)(batch(), head(), q_idx(), 0)))
                  .find("tensor 'g' is the gate tensor (bf16, rank 4) but is also used as f32/rank 4"),
              std::string::npos);
    EXPECT_EQ(why(AttentionSpec(kBase).gate("g").score_mod(
                  score() + Tensor("g", DType::bf16, 4)(batch(), head(), q_idx(), 0))),
              "(valid)");
}

TEST(AttentionSpecStructural, HashAndEqualityFollowEveryField) {
    const AttentionSpec a = AttentionSpec(kBase).gate("g").score_conv("theta", 6, 11);
    const AttentionSpec differ[] = {
        kBase,
        AttentionSpec(a).no_gate(),
        AttentionSpec(a).no_score_conv(),
        AttentionSpec(a).gate("h"),
        AttentionSpec(a).score_conv("kernel", 6, 11),
        AttentionSpec(a).score_conv("theta", 5, 11),
        AttentionSpec(a).score_conv("theta", 6, 9),
        AttentionSpec(a).score_conv("theta", 6, 11, DType::bf16),
    };
    for (const auto& d : differ) {
        EXPECT_NE(d, a) << d;
        EXPECT_NE(d.hash(), a.hash()) << d;
    }
    const AttentionSpec same = AttentionSpec(kBase).score_conv("theta", 6, 11).gate("g");  // order of calls
    EXPECT_EQ(same, a);
    EXPECT_EQ(same.hash(), a.hash());
}

TEST(AttentionSpecStructural, Printing) {
    std::ostringstream os;
    os << AttentionSpec(kBase).gate("g").score_conv("theta", 6, 11, DType::f16);
    EXPECT_NE(os.str().find(", gate=g, score_conv=theta[f16, 6x11])"), std::string::npos) << os.str();
    std::ostringstream plain;
    plain << kBase;
    EXPECT_EQ(plain.str().find("gate"), std::string::npos) << plain.str();
    EXPECT_EQ(plain.str().find("score_conv"), std::string::npos) << plain.str();
}

// ---- JSON ----------------------------------------------------------------------------

void expect_round_trip(const AttentionSpec& spec) {
    const std::string json = spec_to_json(spec);
    const AttentionSpec back = spec_from_json(json);
    EXPECT_EQ(back, spec) << json;
    EXPECT_EQ(back.hash(), spec.hash()) << json;
    EXPECT_EQ(spec_to_json(back), json);
}

TEST(SpecJsonStructural, CanonicalFormAndRoundTrip) {
    const AttentionSpec s = AttentionSpec()
                                .dtype(DType::f16)
                                .head_dim(64)
                                .score_mod(mods::softcap(scalar("cap")))
                                .gate("g")
                                .score_conv("theta", 6, 11, DType::bf16);
    EXPECT_EQ(spec_to_json(s), R"json({
  "format": "attnjit.spec/1",
  "dtype": "f16",
  "head_dim_qk": 64,
  "head_dim_v": 64,
  "q_heads": 0,
  "kv_heads": 0,
  "scale": null,
  "return_lse": false,
  "scalars": {
    "cap": "float"
  },
  "tensors": {
    "g": {
      "dtype": "f16",
      "rank": 4
    },
    "theta": {
      "dtype": "bf16",
      "rank": 3
    }
  },
  "score_mod": "cap * tanh(score / cap)",
  "mask": null,
  "gate": "g",
  "score_conv": {
    "tensor": "theta",
    "c_q": 6,
    "c_k": 11
  }
}
)json");
    expect_round_trip(s);
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) expect_round_trip(AttentionSpec(kBase).score_conv("k", 1, 1, dt));
    expect_round_trip(AttentionSpec(kBase).gate("g"));
    expect_round_trip(AttentionSpec(kBase).gate("g").sinks("s").score_conv("t", 3, 5).mask(mods::causal()));
    // Written only when present.
    EXPECT_EQ(spec_to_json(kBase).find("gate"), std::string::npos);
    EXPECT_EQ(spec_to_json(kBase).find("score_conv"), std::string::npos);
}

std::string doc(const std::string& tensors, const std::string& rest) {
    return "{\"format\": \"attnjit.spec/1\", \"dtype\": \"bf16\", \"head_dim\": 64, \"tensors\": {" + tensors + "}" +
           rest + "}";
}

std::string parse_error(const std::string& text) {
    try {
        spec_from_json(text, "s.json");
    } catch (const UserError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(SpecJsonStructural, HandWrittenDocumentsAndNull) {
    const std::string theta = "\"theta\": {\"dtype\": \"f32\", \"rank\": 3}", g = "\"g\": {\"dtype\": \"bf16\", \"rank\": 4}";
    EXPECT_EQ(spec_from_json(doc(theta + ", " + g, ", \"gate\": \"g\", \"score_conv\": {\"c_k\": 11, \"tensor\": "
                                                   "\"theta\", \"c_q\": 6}")),
              AttentionSpec(kBase).gate("g").score_conv("theta", 6, 11));
    EXPECT_EQ(spec_from_json(doc("", ", \"gate\": null, \"score_conv\": null")), kBase);
}

TEST(SpecJsonStructural, ErrorsNameTheProblem) {
    const std::string theta = "\"theta\": {\"dtype\": \"f32\", \"rank\": 3}", g = "\"g\": {\"dtype\": \"bf16\", \"rank\": 4}";
    auto conv = [](const std::string& body) { return ", \"score_conv\": {" + body + "}"; };
    const std::pair<std::string, std::string> bad[] = {
        {doc(theta, conv("\"tensor\": \"theta\", \"c_q\": 6, \"c_k\": 11, \"stride\": 1")),
         "unknown key \"stride\" in \"score_conv\"; expected tensor, c_q, c_k"},
        {doc(theta, conv("\"tensor\": \"theta\", \"c_q\": 6")), "\"score_conv\" needs \"c_k\""},
        {doc(theta, conv("\"c_q\": 6, \"c_k\": 11")), "\"score_conv\" needs \"tensor\""},
        {doc("", conv("\"tensor\": \"theta\", \"c_q\": 6, \"c_k\": 11")),
         "names tensor \"theta\", which is not declared under \"tensors\""},
        {doc("\"theta\": {\"dtype\": \"i32\", \"rank\": 3}", conv("\"tensor\": \"theta\", \"c_q\": 6, \"c_k\": 11")),
         "the kernel tensor \"theta\" is declared as i32, rank 3"},
        {doc("\"theta\": {\"dtype\": \"f32\", \"rank\": 2}", conv("\"tensor\": \"theta\", \"c_q\": 6, \"c_k\": 11")),
         "the kernel tensor \"theta\" is declared as f32, rank 2"},
        {doc(theta, conv("\"tensor\": 3, \"c_q\": 6, \"c_k\": 11")), "\"tensor\" is the name of the kernel tensor"},
        {doc(theta, conv("\"tensor\": \"theta\", \"c_q\": 6, \"c_k\": 10")), "c_k (key extent) must be odd"},
        {doc(theta, conv("\"tensor\": \"theta\", \"c_q\": 9, \"c_k\": 11")), "c_q (query extent) must be in [1, 8]"},
        {doc(theta, ", \"score_conv\": [6, 11]"), "\"score_conv\" is {\"tensor\": \"theta\", \"c_q\": 6, \"c_k\": 11} or null"},
        {doc(theta, ""), "tensor \"theta\" is declared but nothing reads it"},
        {doc("", ", \"gate\": \"g\""), "names tensor \"g\", which is not declared under \"tensors\""},
        {doc("\"g\": {\"dtype\": \"f32\", \"rank\": 4}", ", \"gate\": \"g\""),
         "the gate tensor \"g\" is declared as f32, rank 4; the gate is shaped like the output"},
        {doc("\"g\": {\"dtype\": \"bf16\", \"rank\": 3}", ", \"gate\": \"g\""), "is declared as bf16, rank 3"},
        {doc(g, ", \"gate\": 1"), "\"gate\" is the name of a declared tensor [B, Hq, Nq, Dv]"},
        {doc(g, ", \"gate\": \"g\", \"scalars\": {\"g\": \"float\"}"), "\"g\" is declared both as a scalar and as a tensor"},
    };
    for (const auto& [text, needle] : bad) {
        const std::string what = parse_error(text);
        EXPECT_NE(what.find(needle), std::string::npos) << text << "\n  -> " << what;
        EXPECT_NE(what.find("s.json:1:"), std::string::npos) << what;
    }
}

TEST(AttentionSpecReciprocalBand, BuilderValidationHashAndPrinting) {
    const AttentionSpec s = AttentionSpec(kBase).reciprocal_band(64, "alpha");
    EXPECT_TRUE(s.has_reciprocal_band());
    EXPECT_EQ(s.reciprocal_band_width(), 64);
    EXPECT_EQ(s.reciprocal_band_alpha(), "alpha");
    EXPECT_TRUE(s.reciprocal_band_causal());
    EXPECT_EQ(s.tensors().at("alpha"), (TensorInfo{DType::f32, 1}));  // [Hq]
    EXPECT_EQ(why(s), "(valid)");
    EXPECT_FALSE(kBase.has_reciprocal_band());
    EXPECT_EQ(kBase.reciprocal_band_width(), -1);
    EXPECT_EQ(AttentionSpec(s).no_reciprocal_band(), kBase);
    EXPECT_EQ(AttentionSpec(s).no_reciprocal_band().hash(), kBase.hash());
    // Every field changes == and the hash.
    for (const AttentionSpec& other : {AttentionSpec(kBase).reciprocal_band(63, "alpha"),
                                       AttentionSpec(kBase).reciprocal_band(64, "beta"),
                                       AttentionSpec(kBase).reciprocal_band(64, "alpha", false), kBase}) {
        EXPECT_NE(other, s);
        EXPECT_NE(other.hash(), s.hash());
    }
    std::ostringstream printed;
    printed << AttentionSpec(kBase).reciprocal_band(7, "a", false);
    EXPECT_NE(printed.str().find("reciprocal_band=a[W=7, non-causal]"), std::string::npos) << printed.str();
    const std::pair<AttentionSpec, std::string> bad[] = {
        {AttentionSpec(kBase).reciprocal_band(-1, "alpha"), "the band width W must be in [0, "},
        {AttentionSpec(kBase).reciprocal_band(8, "2alpha"), "the alpha tensor's name must be a C identifier"},
        {AttentionSpec(kBase).reciprocal_band(8, "alpha").score_conv("theta", 3, 3), "cannot be combined"},
        {AttentionSpec(kBase).reciprocal_band(8, "alpha").score_mod(score() + Tensor("alpha", DType::f32, 2)(0, 0)),
         "tensor 'alpha' is the reciprocal_band alpha tensor (f32, rank 1) but is also used as f32/rank 2"},
    };
    for (const auto& [spec, needle] : bad) EXPECT_NE(why(spec).find(needle), std::string::npos) << why(spec);
    EXPECT_USER_ERROR(AttentionSpec().reciprocal_band(4, ""), "AttentionSpec.reciprocal_band(4, \"\"): name");
}

TEST(SpecJsonReciprocalBand, RoundTripAndErrors) {
    const AttentionSpec s = AttentionSpec(kBase).reciprocal_band(64, "alpha", false);
    EXPECT_EQ(spec_from_json(spec_to_json(s)), s);
    const std::string alpha = "\"alpha\": {\"dtype\": \"f32\", \"rank\": 1}";
    auto band = [](const std::string& body) { return ", \"reciprocal_band\": {" + body + "}"; };
    // "causal" defaults to true.
    EXPECT_EQ(spec_from_json(doc(alpha, band("\"width\": 3, \"alpha\": \"alpha\""))),
              AttentionSpec(kBase).reciprocal_band(3, "alpha"));
    EXPECT_EQ(spec_from_json(doc("", ", \"reciprocal_band\": null")), kBase);
    const std::pair<std::string, std::string> bad[] = {
        {doc(alpha, band("\"width\": 3, \"alpha\": \"alpha\", \"side\": 1")),
         "unknown key \"side\" in \"reciprocal_band\"; expected width, alpha, causal"},
        {doc(alpha, band("\"alpha\": \"alpha\"")), "\"reciprocal_band\" needs \"width\""},
        {doc(alpha, band("\"width\": 3")), "\"reciprocal_band\" needs \"alpha\""},
        {doc("", band("\"width\": 3, \"alpha\": \"alpha\"")), "names tensor \"alpha\", which is not declared"},
        {doc("\"alpha\": {\"dtype\": \"bf16\", \"rank\": 1}", band("\"width\": 3, \"alpha\": \"alpha\"")),
         "the alpha tensor \"alpha\" is declared as bf16, rank 1; it is an f32 tensor of rank 1"},
        {doc(alpha, band("\"width\": -2, \"alpha\": \"alpha\"")), "the band width W must be in [0, "},
        {doc(alpha, band("\"width\": 3, \"alpha\": \"alpha\", \"causal\": 1")), "\"causal\" is true or false"},
        {doc(alpha, ", \"reciprocal_band\": 64"), "\"reciprocal_band\" is {\"width\": 64"},
    };
    for (const auto& [text, needle] : bad) {
        const std::string what = parse_error(text);
        EXPECT_NE(what.find(needle), std::string::npos) << text << "\n  -> " << what;
    }
}

}  // namespace
}  // namespace attnjit::dsl
