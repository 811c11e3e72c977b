// AttentionSpec: everything a user asks of one attention kernel. A value type with a
// fluent builder; validate() reports a user's mistake before anything is generated.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "dsl/ir.h"
#include "support/dtype.h"

namespace attnjit::dsl {

// What a spec reads at launch besides Q, K, V: captured tensors and runtime scalars.
struct TensorInfo {
    DType dtype;
    int rank;
    bool operator==(const TensorInfo& o) const { return dtype == o.dtype && rank == o.rank; }
};

class AttentionSpec {
public:
    AttentionSpec() = default;

    // Element type of Q, K, V and O: f16, bf16 or f32.
    AttentionSpec& dtype(DType d);
    // Head dims of Q/K and of V/O (each a multiple of 8 from 8 to 256; the kernels pad other
    // than 32, 64, 96, 128, 256 internally: templates/attnjit/common/kernel_config.h).
    AttentionSpec& head_dim(int d);
    AttentionSpec& head_dims(int dqk, int dv);
    // Query and key/value heads; 0 means "taken from the tensors at launch".
    // Hq == Hkv is MHA, Hkv == 1 is MQA, anything else dividing Hq is GQA.
    AttentionSpec& heads(int q_heads, int kv_heads);
    // Softmax scale; default 1/sqrt(Dqk) (1/sqrt(L) with latent()). A runtime value: changing
    // it never recompiles.
    AttentionSpec& scale(double s);
    // t = score_mod(score, ...): a float expression that may read score().
    AttentionSpec& score_mod(Expr e);
    // keep(i, j): a bool expression of indices, scalars and tensors (never the score).
    // Calling mask() again replaces the mask; combine masks with &&.
    AttentionSpec& mask(Expr e);
    AttentionSpec& return_lse(bool on = true);
    // Learnable attention sinks (gpt-oss style): a per-query-head logit sink[h], read from
    // the captured tensor `name` of shape [Hq] (f32, f16 or bf16), that joins every row's
    // softmax denominator and takes no value: P_ij = exp(t_ij) / (exp(sink_h) + sum_j'
    // exp(t_ij')), LSE_i = log(exp(sink_h) + sum_j exp(t_ij)); a row with no kept key gives
    // O = 0 and LSE = sink_h. The tensor is passed at launch like any captured tensor
    // (LaunchArgs::tensors[name]); its gradient is GradArgs::grads[name].
    AttentionSpec& sinks(const std::string& name, DType dtype = DType::f32);
    AttentionSpec& no_sinks();
    // Output gate (AlphaFold's gated attention): out = sigmoid(g) * O, elementwise, fused into
    // the epilogue. `name` is a captured tensor shaped like the output, [B, Hq, Nq, Dv], of the
    // spec's dtype, any strides (stride 0 broadcasts); its gradient is GradArgs::grads[name].
    // The forward returns the gated output; LSE is the ungated softmax's.
    AttentionSpec& gate(const std::string& name);
    AttentionSpec& no_gate();
    // Score convolution (Multi-Token Attention, SEMANTICS.md section 3): a per-query-head
    // kernel theta [Hq, c_q, c_k] (the captured tensor `name`, f32, f16 or bf16) convolved
    // over the scaled, causally zero-masked scores before softmax; causal (top-left) by
    // definition. 1 <= c_q <= kMaxScoreConvRows, c_k odd, 1 <= c_k <= kMaxScoreConvCols.
    // score_mod applies to the convolved score; a mask applies to the convolution's input and
    // output and keeps each tap inside the mask (docs/score_convolution.md).
    AttentionSpec& score_conv(const std::string& name, int c_q, int c_k, DType dtype = DType::f32);
    AttentionSpec& no_score_conv();
    // Reciprocal band (RA, SEMANTICS.md section 4): T_ij = s_ij + alpha_h * [band] * s_ji with
    // s_ji = scale * <q_j, k_i>, before score_mod. Causal (the default): band 0 <= i - j <= W,
    // and keys j > i are masked (top-left, as with causal()); non-causal: |i - j| <= W, no
    // mask implied. alpha is the captured f32 tensor `alpha` [Hq] (one weight per query head; a
    // single weight is a stride-0 view of one float), a runtime value that may require a
    // gradient. Self-attention only: Nq == Nk at launch. 0 <= width <= kMaxReciprocalBandWidth.
    AttentionSpec& reciprocal_band(int width, const std::string& alpha, bool causal = true);
    AttentionSpec& no_reciprocal_band();
    // Latent projection (MLA, SEMANTICS.md section 4): K and V are the latent tensors
    // [B, 1, Nk, L], one KV head shared by every query head. Per query head h:
    // Q_lat = Q_h w_qlat[h], s_ij = scale * <Q_lat_i, K_j>, O_h = (P V) w_vup[h], with the
    // captured tensors w_qlat [Hq, Dqk, L] and w_vup [Hq, L, Dv] of the spec's dtype; the
    // default scale is 1/sqrt(L). head_dims() stay Q's and O's. score_mod, mask, sinks and a
    // reciprocal band act on these scores as usual; the gate on O_h. L a multiple of 8 in
    // [8, kMaxLatentDim]; kv heads 1 (or 0: from the tensors); not with a score convolution.
    AttentionSpec& latent(int dim, const std::string& w_qlat, const std::string& w_vup);
    AttentionSpec& no_latent();

    DType dtype() const { return dtype_; }
    int head_dim_qk() const { return dqk_; }
    int head_dim_v() const { return dv_; }
    int q_heads() const { return q_heads_; }
    int kv_heads() const { return kv_heads_; }
    std::optional<double> scale() const { return scale_; }
    double scale_or_default() const;
    const Expr& score_mod() const { return score_mod_; }  // undefined = identity
    const Expr& mask() const { return mask_; }            // undefined = keep all
    bool returns_lse() const { return return_lse_; }
    bool has_sinks() const { return !sinks_name_.empty(); }
    const std::string& sinks_name() const { return sinks_name_; }  // empty without sinks
    DType sinks_dtype() const { return sinks_dtype_; }
    bool has_gate() const { return !gate_name_.empty(); }
    const std::string& gate_name() const { return gate_name_; }  // empty without a gate
    bool has_score_conv() const { return !conv_name_.empty(); }
    const std::string& score_conv_name() const { return conv_name_; }  // empty without one
    int score_conv_rows() const { return conv_rows_; }                  // c_q (0 without)
    int score_conv_cols() const { return conv_cols_; }                  // c_k (0 without)
    DType score_conv_dtype() const { return conv_dtype_; }
    bool has_reciprocal_band() const { return !band_alpha_.empty(); }
    int reciprocal_band_width() const { return band_width_; }              // W (-1 without a band)
    const std::string& reciprocal_band_alpha() const { return band_alpha_; }  // empty without one
    bool reciprocal_band_causal() const { return band_causal_; }
    bool has_latent() const { return !latent_w_qlat_.empty(); }
    int latent_dim() const { return latent_dim_; }                       // L (0 without)
    const std::string& latent_w_qlat() const { return latent_w_qlat_; }  // empty without one
    const std::string& latent_w_vup() const { return latent_w_vup_; }    // empty without one

    // Captured tensors and scalars the expressions read (and the sinks tensor), sorted by name.
    std::map<std::string, TensorInfo> tensors() const;
    std::map<std::string, Type> scalars() const;

    // Throws UserError naming the first problem and what to do about it.
    void validate() const;
    std::optional<std::string> why_invalid() const;

    // Deterministic hash of everything in the spec.
    uint64_t hash() const;
    bool operator==(const AttentionSpec& o) const;
    bool operator!=(const AttentionSpec& o) const { return !(*this == o); }

private:
    DType dtype_ = DType::f16;
    int dqk_ = 128, dv_ = 128;
    int q_heads_ = 0, kv_heads_ = 0;
    std::optional<double> scale_;
    Expr score_mod_, mask_;
    bool return_lse_ = false;
    std::string sinks_name_;  // empty: no sinks
    DType sinks_dtype_ = DType::f32;
    std::string gate_name_;  // empty: no gate
    std::string conv_name_;  // empty: no score convolution
    int conv_rows_ = 0, conv_cols_ = 0;
    DType conv_dtype_ = DType::f32;
    std::string band_alpha_;  // empty: no reciprocal band
    int band_width_ = -1;
    bool band_causal_ = true;
    std::string latent_w_qlat_, latent_w_vup_;  // empty: no latent projection
    int latent_dim_ = 0;
};

// Largest score convolution kernel (c_q x c_k) the kernels take: the MTA paper's 6 x 11 and
// every smaller one fit.
inline constexpr int kMaxScoreConvRows = 8;
inline constexpr int kMaxScoreConvCols = 15;
// Widest reciprocal band: W is a compile-time constant of the kernels, and a band wider than
// any sequence the kernels take is no band limit at all.
inline constexpr int kMaxReciprocalBandWidth = 1 << 30;
// AttentionSpec::latent's largest L (DeepSeek's MLA has L = 512).
inline constexpr int kMaxLatentDim = 512;

std::ostream& operator<<(std::ostream& os, const AttentionSpec& s);

}  // namespace attnjit::dsl
