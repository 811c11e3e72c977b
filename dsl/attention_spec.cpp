#include "dsl/attention_spec.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "dsl/equality.h"
#include "dsl/limits.h"
#include "dsl/printer.h"
#include "dsl/vars.h"
#include "dsl/visitor.h"
#include "support/error.h"

namespace attnjit::dsl {

AttentionSpec& AttentionSpec::dtype(DType d) {
    dtype_ = d;
    return *this;
}
AttentionSpec& AttentionSpec::head_dim(int d) { return head_dims(d, d); }
AttentionSpec& AttentionSpec::head_dims(int dqk, int dv) {
    dqk_ = dqk;
    dv_ = dv;
    return *this;
}
AttentionSpec& AttentionSpec::heads(int q, int kv) {
    q_heads_ = q;
    kv_heads_ = kv;
    return *this;
}
AttentionSpec& AttentionSpec::scale(double s) {
    scale_ = s;
    return *this;
}
AttentionSpec& AttentionSpec::score_mod(Expr e) {
    score_mod_ = std::move(e);
    return *this;
}
AttentionSpec& AttentionSpec::mask(Expr e) {
    mask_ = std::move(e);
    return *this;
}
AttentionSpec& AttentionSpec::return_lse(bool on) {
    return_lse_ = on;
    return *this;
}
AttentionSpec& AttentionSpec::sinks(const std::string& name, DType dtype) {
    user_check(!name.empty()) << "AttentionSpec.sinks(\"\"): name the captured tensor [Hq] that holds the sink "
                                 "logits, or call no_sinks()";
    sinks_name_ = name;
    sinks_dtype_ = dtype;
    return *this;
}
AttentionSpec& AttentionSpec::no_sinks() {
    sinks_name_.clear();
    sinks_dtype_ = DType::f32;
    return *this;
}

AttentionSpec& AttentionSpec::gate(const std::string& name) {
    user_check(!name.empty()) << "AttentionSpec.gate(\"\"): name the captured tensor [B, Hq, Nq, Dv] that holds the "
                                 "gate logits, or call no_gate()";
    gate_name_ = name;
    return *this;
}
AttentionSpec& AttentionSpec::no_gate() {
    gate_name_.clear();
    return *this;
}
AttentionSpec& AttentionSpec::score_conv(const std::string& name, int c_q, int c_k, DType dtype) {
    user_check(!name.empty()) << "AttentionSpec.score_conv(\"\", " << c_q << ", " << c_k
                              << "): name the captured tensor [Hq, c_q, c_k] that holds the kernel, or call "
                                 "no_score_conv()";
    conv_name_ = name;
    conv_rows_ = c_q;
    conv_cols_ = c_k;
    conv_dtype_ = dtype;
    return *this;
}
AttentionSpec& AttentionSpec::no_score_conv() {
    conv_name_.clear();
    conv_rows_ = conv_cols_ = 0;
    conv_dtype_ = DType::f32;
    return *this;
}

AttentionSpec& AttentionSpec::reciprocal_band(int width, const std::string& alpha, bool causal) {
    user_check(!alpha.empty()) << "AttentionSpec.reciprocal_band(" << width
                               << ", \"\"): name the captured f32 tensor [Hq] that holds alpha, or call "
                                  "no_reciprocal_band()";
    band_width_ = width;
    band_alpha_ = alpha;
    band_causal_ = causal;
    return *this;
}
AttentionSpec& AttentionSpec::no_reciprocal_band() {
    band_alpha_.clear();
    band_width_ = -1;
    band_causal_ = true;
    return *this;
}

AttentionSpec& AttentionSpec::latent(int dim, const std::string& w_qlat, const std::string& w_vup) {
    user_check(!w_qlat.empty() && !w_vup.empty())
        << "AttentionSpec.latent(" << dim << ", \"" << w_qlat << "\", \"" << w_vup
        << "\"): name both captured tensors, w_qlat [Hq, Dqk, L] and w_vup [Hq, L, Dv], or call no_latent()";
    latent_dim_ = dim;
    latent_w_qlat_ = w_qlat;
    latent_w_vup_ = w_vup;
    return *this;
}
AttentionSpec& AttentionSpec::no_latent() {
    latent_w_qlat_.clear();
    latent_w_vup_.clear();
    latent_dim_ = 0;
    return *this;
}

// With a latent projection the scores are dot products of width L, not Dqk.
double AttentionSpec::scale_or_default() const {
    return scale_ ? *scale_ : 1.0 / std::sqrt(double(has_latent() ? latent_dim_ : dqk_));
}

namespace {

// Collects tensors and scalars; the first conflicting use is reported.
struct Inputs {
    std::map<std::string, TensorInfo> tensors;
    std::map<std::string, Type> scalars;
    std::optional<std::string> conflict;

    void collect(const Expr& e, const char* where) {
        if (!e.defined()) return;
        for_each_node(e, [&](const Expr& n) {
            if (conflict) return;
            if (auto t = n.as<TensorLoad>()) {
                TensorInfo info{t->dtype, static_cast<int>(t->indices.size())};
                if (scalars.count(t->name)) {
                    conflict = "'" + t->name + "' is used both as a scalar and as a tensor (in " + where +
                               "); give them different names";
                    return;
                }
                auto [it, fresh] = tensors.emplace(t->name, info);
                if (!fresh && !(it->second == info))
                    conflict = "tensor '" + t->name + "' is used with two different dtypes or ranks (" +
                               dtype_name(it->second.dtype) + "/" + std::to_string(it->second.rank) +
                               " and " + dtype_name(info.dtype) + "/" + std::to_string(info.rank) +
                               ", in " + where + "); declare it once and reuse the Tensor object";
            } else if (auto s = n.as<ScalarParam>()) {
                if (tensors.count(s->name)) {
                    conflict = "'" + s->name + "' is used both as a tensor and as a scalar (in " + where +
                               "); give them different names";
                    return;
                }
                auto [it, fresh] = scalars.emplace(s->name, s->type);
                if (!fresh && it->second != s->type)
                    conflict = "scalar '" + s->name + "' is used both as float and as int (in " +
                               std::string(where) + "); use scalar() or int_scalar() consistently";
            }
        });
    }

    // A tensor the spec names for a structural feature (`what`: "sinks", "gate", ...).
    void add_structural(const std::string& name, TensorInfo info, const char* what) {
        if (conflict) return;
        if (scalars.count(name)) {
            conflict = "'" + name + "' is used both as a scalar and as the " + what + " tensor; give them different names";
            return;
        }
        auto [it, fresh] = tensors.emplace(name, info);
        if (!fresh && !(it->second == info))
            conflict = "tensor '" + name + "' is the " + what + " tensor (" + dtype_name(info.dtype) + ", rank " +
                       std::to_string(info.rank) + ") but is also used as " + dtype_name(it->second.dtype) + "/rank " +
                       std::to_string(it->second.rank) + "; use one declaration";
    }
};

Inputs collect_inputs(const AttentionSpec& s) {
    Inputs in;
    in.collect(s.score_mod(), "score_mod");
    in.collect(s.mask(), "mask");
    // The structural tensors are captured tensors like any other (an expression may read them
    // too, as the same dtype and rank).
    if (s.has_sinks()) in.add_structural(s.sinks_name(), {s.sinks_dtype(), 1}, "sinks");
    if (s.has_gate()) in.add_structural(s.gate_name(), {s.dtype(), 4}, "gate");
    if (s.has_score_conv()) in.add_structural(s.score_conv_name(), {s.score_conv_dtype(), 3}, "score_conv");
    if (s.has_reciprocal_band()) in.add_structural(s.reciprocal_band_alpha(), {DType::f32, 1}, "reciprocal_band alpha");
    if (s.has_latent()) {
        in.add_structural(s.latent_w_qlat(), {s.dtype(), 3}, "latent w_qlat");
        in.add_structural(s.latent_w_vup(), {s.dtype(), 3}, "latent w_vup");
    }
    return in;
}

bool reads_score(const Expr& e) {
    bool found = false;
    for_each_node(e, [&](const Expr& n) {
        if (auto v = n.as<Var>()) found |= v->var == VarKind::Score;
    });
    return found;
}

bool has_temp(const Expr& e) {
    bool found = false;
    for_each_node(e, [&](const Expr& n) { found |= n.as<Temp>() != nullptr; });
    return found;
}

}  // namespace

std::map<std::string, TensorInfo> AttentionSpec::tensors() const { return collect_inputs(*this).tensors; }
std::map<std::string, Type> AttentionSpec::scalars() const { return collect_inputs(*this).scalars; }

std::optional<std::string> AttentionSpec::why_invalid() const {
    std::ostringstream why;
    if (dtype_ != DType::f16 && dtype_ != DType::bf16 && dtype_ != DType::f32) {
        why << "AttentionSpec.dtype is " << dtype_name(dtype_) << "; Q, K, V must be f16, bf16 or f32";
        return why.str();
    }
    // Which head dims have kernels is the kernels' business (codegen::make_config).
    for (int d : {dqk_, dv_}) {
        if (d <= 0) {
            why << "AttentionSpec.head_dims(" << dqk_ << ", " << dv_ << "): head dim " << d
                << " is not positive";
            return why.str();
        }
    }
    if (q_heads_ < 0 || kv_heads_ < 0 || (q_heads_ == 0) != (kv_heads_ == 0)) {
        why << "AttentionSpec.heads(" << q_heads_ << ", " << kv_heads_
            << "): give both head counts (positive), or neither to take them from the tensors";
        return why.str();
    }
    if (q_heads_ > 0 && q_heads_ % kv_heads_ != 0) {
        why << "AttentionSpec.heads(" << q_heads_ << ", " << kv_heads_
            << "): query heads must be a multiple of key/value heads (MHA: equal, GQA: a divisor, MQA: 1)";
        return why.str();
    }
    if (scale_ && (!std::isfinite(*scale_) || *scale_ == 0.0)) {
        why << "AttentionSpec.scale(" << *scale_ << "): the softmax scale must be finite and non-zero";
        return why.str();
    }
    if (scale_) {
        // The kernels use the scale, and the scale times log2(e), as normal fp32 numbers.
        const float f = static_cast<float>(*scale_), f2 = static_cast<float>(*scale_ * 1.4426950408889634);
        if (!std::isnormal(f) || !std::isnormal(f2)) {
            why << "AttentionSpec.scale(" << *scale_
                << "): the softmax scale must be a normal fp32 number (about 1e-38 to 1e38 in magnitude); "
                   "fold a larger or smaller factor into score_mod";
            return why.str();
        }
    }
    if (scale_ && *scale_ < 0 && !score_mod_.defined()) {
        // Without a score_mod the kernel folds the scale into exp2 and takes the running
        // max of the raw <q, k>, which is only the max of the scores for a positive scale.
        why << "AttentionSpec.scale(" << *scale_
            << "): a negative scale needs a score_mod; write scale(" << -*scale_
            << ") and score_mod(-score()) instead";
        return why.str();
    }
    for (const Expr* e : {&score_mod_, &mask_}) {
        try {
            check_expr_limits(*e);  // a tree built with make() directly has not been checked
        } catch (const UserError& err) {
            why << (e == &mask_ ? "mask: " : "score_mod: ") << err.what();
            return why.str();
        }
    }
    if (score_mod_.defined()) {
        if (score_mod_.type() != Type::Float) {
            why << "score_mod " << score_mod_ << " has type " << score_mod_.type()
                << "; a score_mod must produce a float score (a bool condition belongs in mask())";
            return why.str();
        }
        if (has_temp(score_mod_)) return std::string("score_mod contains a codegen temporary; build it from DSL values");
    }
    if (mask_.defined()) {
        if (mask_.type() != Type::Bool) {
            why << "mask " << mask_ << " has type " << mask_.type()
                << "; a mask must be a bool expression (true = keep), e.g. kv_idx() <= q_idx()";
            return why.str();
        }
        if (reads_score(mask_)) {
            why << "mask " << mask_
                << " reads the score; masks may only depend on indices, scalars and tensors. Put "
                   "score-dependent logic in score_mod, e.g. select(cond, score(), -infinity())";
            return why.str();
        }
        if (has_temp(mask_)) return std::string("mask contains a codegen temporary; build it from DSL values");
    }
    if (has_sinks()) {
        if (!is_valid_user_name(sinks_name_)) {
            why << "AttentionSpec.sinks(\"" << sinks_name_
                << "\"): the sinks tensor's name must be a C identifier that is not a built-in name";
            return why.str();
        }
        if (sinks_dtype_ != DType::f32 && sinks_dtype_ != DType::f16 && sinks_dtype_ != DType::bf16) {
            why << "AttentionSpec.sinks(\"" << sinks_name_ << "\", " << dtype_name(sinks_dtype_)
                << "): sink logits are a float tensor [Hq] (f32, f16 or bf16)";
            return why.str();
        }
    }
    if (has_gate() && !is_valid_user_name(gate_name_)) {
        why << "AttentionSpec.gate(\"" << gate_name_
            << "\"): the gate tensor's name must be a C identifier that is not a built-in name";
        return why.str();
    }
    if (has_score_conv()) {
        const std::string call = "AttentionSpec.score_conv(\"" + conv_name_ + "\", " + std::to_string(conv_rows_) +
                                 ", " + std::to_string(conv_cols_) + ")";
        if (!is_valid_user_name(conv_name_)) {
            why << call << ": the kernel tensor's name must be a C identifier that is not a built-in name";
            return why.str();
        }
        if (conv_rows_ < 1 || conv_rows_ > kMaxScoreConvRows) {
            why << call << ": c_q (query extent) must be in [1, " << kMaxScoreConvRows << "]";
            return why.str();
        }
        if (conv_cols_ < 1 || conv_cols_ > kMaxScoreConvCols || conv_cols_ % 2 == 0) {
            why << call << ": c_k (key extent) must be odd and in [1, " << kMaxScoreConvCols
                << "] (the key taps are centred on the key: j - (c_k-1)/2 .. j + (c_k-1)/2)";
            return why.str();
        }
        if (conv_dtype_ != DType::f32 && conv_dtype_ != DType::f16 && conv_dtype_ != DType::bf16) {
            why << call << ": the kernel is a float tensor [Hq, c_q, c_k] (f32, f16 or bf16), not "
                << dtype_name(conv_dtype_);
            return why.str();
        }
    }
    if (has_reciprocal_band()) {
        const std::string call = "AttentionSpec.reciprocal_band(" + std::to_string(band_width_) + ", \"" +
                                 band_alpha_ + "\"" + (band_causal_ ? "" : ", false") + ")";
        if (!is_valid_user_name(band_alpha_)) {
            why << call << ": the alpha tensor's name must be a C identifier that is not a built-in name";
            return why.str();
        }
        if (band_width_ < 0 || band_width_ > kMaxReciprocalBandWidth) {
            why << call << ": the band width W must be in [0, " << kMaxReciprocalBandWidth
                << "] (W = 0 is the diagonal alone)";
            return why.str();
        }
        if (has_score_conv()) {
            why << call << ": a reciprocal band and a score convolution cannot be combined (both rewrite the score "
                           "tile before score_mod); use one of them";
            return why.str();
        }
    }
    if (has_latent()) {
        const std::string call = "AttentionSpec.latent(" + std::to_string(latent_dim_) + ", \"" + latent_w_qlat_ +
                                 "\", \"" + latent_w_vup_ + "\")";
        for (const auto& [name, what] : {std::pair{&latent_w_qlat_, "w_qlat"}, std::pair{&latent_w_vup_, "w_vup"}})
            if (!is_valid_user_name(*name)) {
                why << call << ": the " << what << " tensor's name must be a C identifier that is not a built-in name";
                return why.str();
            }
        if (latent_w_qlat_ == latent_w_vup_) {
            why << call << ": w_qlat [Hq, Dqk, L] and w_vup [Hq, L, Dv] are two different tensors; give them "
                           "different names";
            return why.str();
        }
        if (latent_dim_ < 8 || latent_dim_ > kMaxLatentDim || latent_dim_ % 8 != 0) {
            why << call << ": the latent dim L must be a multiple of 8 in [8, " << kMaxLatentDim << "]";
            return why.str();
        }
        if (kv_heads_ > 1) {
            why << call << ": the latent K and V are one head shared by every query head, so kv_heads is 1 (or 0 to "
                           "take it from the tensors), not "
                << kv_heads_ << "; write heads(" << q_heads_ << ", 1)";
            return why.str();
        }
        if (has_score_conv()) {
            why << call << ": a latent projection and a score convolution cannot be combined (no kernel or "
                           "reference computes both); use one of them";
            return why.str();
        }
    }
    Inputs in = collect_inputs(*this);
    if (in.conflict) return in.conflict;
    if (in.tensors.size() > static_cast<size_t>(kMaxCapturedTensors)) {
        why << "the spec reads " << in.tensors.size() << " captured tensors, and the limit is "
            << kMaxCapturedTensors << " (docs/spec_format.md, Limits); pack related values into one tensor "
                                      "with an extra dimension";
        return why.str();
    }
    if (in.scalars.size() > static_cast<size_t>(kMaxRuntimeScalars)) {
        why << "the spec reads " << in.scalars.size() << " runtime scalars, and the limit is " << kMaxRuntimeScalars
            << " (docs/spec_format.md, Limits); pass a table of values as a captured tensor instead";
        return why.str();
    }
    return std::nullopt;
}

void AttentionSpec::validate() const {
    if (auto why = why_invalid()) user_error << *why;
}

uint64_t AttentionSpec::hash() const {
    uint64_t h = hash_string("AttentionSpec/v1");
    h = hash_combine(h, static_cast<uint64_t>(dtype_));
    h = hash_combine(h, static_cast<uint64_t>(dqk_));
    h = hash_combine(h, static_cast<uint64_t>(dv_));
    h = hash_combine(h, static_cast<uint64_t>(q_heads_));
    h = hash_combine(h, static_cast<uint64_t>(kv_heads_));
    uint64_t scale_bits = 0;
    if (scale_) std::memcpy(&scale_bits, &*scale_, sizeof scale_bits);
    h = hash_combine(h, scale_ ? scale_bits : 0x1234567ULL);
    h = hash_combine(h, structural_hash(score_mod_));
    h = hash_combine(h, structural_hash(mask_));
    h = hash_combine(h, return_lse_ ? 1 : 2);
    // Specs without sinks keep the hash they had before sinks existed (cache keys).
    if (has_sinks()) h = hash_combine(hash_combine(h, hash_string("sinks/" + sinks_name_)), static_cast<uint64_t>(sinks_dtype_));
    if (has_gate()) h = hash_combine(h, hash_string("gate/" + gate_name_));
    if (has_score_conv()) {
        h = hash_combine(h, hash_string("score_conv/" + conv_name_));
        h = hash_combine(hash_combine(h, static_cast<uint64_t>(conv_rows_)), static_cast<uint64_t>(conv_cols_));
        h = hash_combine(h, static_cast<uint64_t>(conv_dtype_));
    }
    if (has_reciprocal_band()) {
        h = hash_combine(h, hash_string("reciprocal_band/" + band_alpha_));
        h = hash_combine(hash_combine(h, static_cast<uint64_t>(band_width_)), band_causal_ ? 1 : 2);
    }
    if (has_latent()) {
        h = hash_combine(h, hash_string("latent/" + latent_w_qlat_));
        h = hash_combine(h, hash_string("latent_vup/" + latent_w_vup_));
        h = hash_combine(h, static_cast<uint64_t>(latent_dim_));
    }
    return h;
}

bool AttentionSpec::operator==(const AttentionSpec& o) const {
    return dtype_ == o.dtype_ && dqk_ == o.dqk_ && dv_ == o.dv_ && q_heads_ == o.q_heads_ &&
           kv_heads_ == o.kv_heads_ && scale_ == o.scale_ && equal(score_mod_, o.score_mod_) &&
           equal(mask_, o.mask_) && return_lse_ == o.return_lse_ && sinks_name_ == o.sinks_name_ &&
           sinks_dtype_ == o.sinks_dtype_ && gate_name_ == o.gate_name_ && conv_name_ == o.conv_name_ &&
           conv_rows_ == o.conv_rows_ && conv_cols_ == o.conv_cols_ && conv_dtype_ == o.conv_dtype_ &&
           band_alpha_ == o.band_alpha_ && band_width_ == o.band_width_ && band_causal_ == o.band_causal_ &&
           latent_w_qlat_ == o.latent_w_qlat_ && latent_w_vup_ == o.latent_w_vup_ && latent_dim_ == o.latent_dim_;
}

std::ostream& operator<<(std::ostream& os, const AttentionSpec& s) {
    os << "AttentionSpec(dtype=" << dtype_name(s.dtype()) << ", head_dims=" << s.head_dim_qk() << "x"
       << s.head_dim_v();
    if (s.q_heads()) os << ", heads=" << s.q_heads() << "/" << s.kv_heads();
    if (s.scale()) os << ", scale=" << float_literal(*s.scale());
    if (s.score_mod().defined()) os << ", score_mod=" << s.score_mod();
    if (s.mask().defined()) os << ", mask=" << s.mask();
    if (s.returns_lse()) os << ", return_lse";
    if (s.has_sinks()) os << ", sinks=" << s.sinks_name() << "[" << dtype_name(s.sinks_dtype()) << "]";
    if (s.has_gate()) os << ", gate=" << s.gate_name();
    if (s.has_score_conv())
        os << ", score_conv=" << s.score_conv_name() << "[" << dtype_name(s.score_conv_dtype()) << ", "
           << s.score_conv_rows() << "x" << s.score_conv_cols() << "]";
    if (s.has_reciprocal_band())
        os << ", reciprocal_band=" << s.reciprocal_band_alpha() << "[W=" << s.reciprocal_band_width()
           << (s.reciprocal_band_causal() ? ", causal" : ", non-causal") << "]";
    if (s.has_latent()) os << ", latent=" << s.latent_dim() << "[" << s.latent_w_qlat() << ", " << s.latent_w_vup() << "]";
    return os << ")";
}

}  // namespace attnjit::dsl
