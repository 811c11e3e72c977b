#include "reference/inputs.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "reference/gate.h"
#include "reference/latent.h"
#include "support/error.h"

namespace attnjit::reference {
namespace {

void check_qkv(const char* who, const HostTensor& t, const char* name, const char* layout, DType dtype) {
    user_check(t.rank() == 4) << who << ": " << name << " has rank " << t.rank() << " ("
                              << t.describe() << "); it must be " << layout;
    user_check(t.dtype() == dtype) << who << ": " << name << " has dtype " << dtype_name(t.dtype())
                                   << " but the spec's dtype is " << dtype_name(dtype);
}

}  // namespace

Dims check_inputs(const dsl::AttentionSpec& spec, const ForwardInputs& in, const char* who) {
    spec.validate();
    const DType dt = spec.dtype();
    check_qkv(who, in.q, "q", "[B, Hq, Nq, Dqk]", dt);
    const bool latent = spec.has_latent();
    check_qkv(who, in.k, "k", latent ? "[B, 1, Nk, L]" : "[B, Hkv, Nk, Dqk]", dt);
    check_qkv(who, in.v, "v", latent ? "[B, 1, Nk, L]" : "[B, Hkv, Nk, Dv]", dt);
    Dims x;
    const int64_t B = in.q.size(0), Hq = in.q.size(1), Nq = in.q.size(2), Dqk = in.q.size(3);
    const int64_t Hkv = in.k.size(1), Nk = in.k.size(2);
    // The output's head dim: w_vup's columns with a latent projection, else V's.
    const int64_t Dv = latent ? spec.head_dim_v() : in.v.size(3);
    if (latent) {
        user_check(Dqk == spec.head_dim_qk())
            << who << ": q " << in.q.describe() << " must have head dim " << spec.head_dim_qk() << " (the spec's)";
        check_latent_kv(who, spec, in);
    } else {
        user_check(Dqk == spec.head_dim_qk() && in.k.size(3) == Dqk)
            << who << ": q " << in.q.describe() << " and k " << in.k.describe() << " must have head dim "
            << spec.head_dim_qk() << " (the spec's)";
        user_check(Dv == spec.head_dim_v()) << who << ": v " << in.v.describe() << " must have head dim "
                                            << spec.head_dim_v() << " (the spec's)";
    }
    user_check(in.k.size(0) == B && in.v.size(0) == B)
        << who << ": batch differs: q " << in.q.describe() << ", k " << in.k.describe() << ", v "
        << in.v.describe();
    user_check(in.v.size(1) == Hkv && in.v.size(2) == Nk)
        << who << ": k " << in.k.describe() << " and v " << in.v.describe()
        << " must have the same heads and length";
    user_check(Hkv > 0 && Hq % Hkv == 0) << who << ": q has " << Hq << " heads, k has " << Hkv
                                         << "; query heads must be a multiple of key/value heads";
    if (spec.q_heads() > 0)
        user_check(Hq == spec.q_heads() && Hkv == spec.kv_heads())
            << who << ": q/k heads " << Hq << "/" << Hkv << " differ from the spec's "
            << spec.q_heads() << "/" << spec.kv_heads();

    for (const auto& [name, info] : spec.tensors()) {
        auto it = in.tensors.find(name);
        user_check(it != in.tensors.end()) << who << ": captured tensor '" << name
                                           << "' is read by the spec but not given";
        user_check(it->second.dtype() == info.dtype && it->second.rank() == info.rank)
            << who << ": tensor '" << name << "' is " << it->second.describe() << " but the spec reads a "
            << dtype_name(info.dtype) << " tensor of rank " << info.rank;
    }
    auto spec_tensors = spec.tensors();
    for (const auto& [name, t] : in.tensors)
        user_check(spec_tensors.count(name)) << who << ": tensor '" << name
                                             << "' is given but the spec does not read it";
    auto spec_scalars = spec.scalars();
    for (const auto& [name, type] : spec_scalars) {
        auto it = in.scalars.find(name);
        user_check(it != in.scalars.end()) << who << ": scalar '" << name
                                           << "' is read by the spec but not given";
        if (type == dsl::Type::Int)
            user_check(std::isfinite(it->second) && it->second == std::trunc(it->second))
                << who << ": int scalar '" << name << "' = " << it->second << " is not an integer";
    }
    for (const auto& [name, v] : in.scalars)
        user_check(spec_scalars.count(name)) << who << ": scalar '" << name
                                             << "' is given but the spec does not read it";

    if (spec.has_sinks()) {
        const HostTensor& st = in.tensors.at(spec.sinks_name());
        user_check(st.shape().size() == 1 && (st.shape()[0] == Hq))
            << who << ": the sinks tensor '" << spec.sinks_name() << "' must have shape [Hq] = [" << Hq << "]";
    }

    if (latent) check_latent_weights(who, spec, in);
    if (spec.has_gate()) check_gate_shape(who, spec.gate_name(), in.tensors.at(spec.gate_name()), B, Hq, Nq, Dv);
    if (spec.has_score_conv()) {
        const HostTensor& th = in.tensors.at(spec.score_conv_name());
        const std::vector<int64_t> want{Hq, spec.score_conv_rows(), spec.score_conv_cols()};
        user_check(th.shape() == want)
            << who << ": the score convolution's kernel '" << spec.score_conv_name() << "' is " << th.describe()
            << "; it must be [Hq, c_q, c_k] = [" << Hq << ", " << spec.score_conv_rows() << ", "
            << spec.score_conv_cols() << "]";
    }
    if (spec.has_reciprocal_band()) {
        const HostTensor& al = in.tensors.at(spec.reciprocal_band_alpha());
        user_check(al.shape().size() == 1 && al.shape()[0] == Hq)
            << who << ": the reciprocal band's alpha '" << spec.reciprocal_band_alpha() << "' is " << al.describe()
            << "; it must be [Hq] = [" << Hq << "] (one weight a query head)";
        user_check(Nq == Nk) << who << ": the reciprocal band pairs query i with key i (s_ji = <q_j, k_i>), so it "
                             << "needs self-attention, Nq == Nk; q has " << Nq << " rows and k " << Nk;
    }
    x.B = B;
    x.Hq = Hq;
    x.Nq = Nq;
    x.Dqk = Dqk;
    x.Hkv = Hkv;
    x.Nk = Nk;
    x.Dv = Dv;
    x.L = latent ? spec.latent_dim() : 0;
    return x;
}

double sink_logit(const dsl::AttentionSpec& spec, const ForwardInputs& in, int64_t h) {
    if (!spec.has_sinks()) return -std::numeric_limits<double>::infinity();
    return in.tensors.at(spec.sinks_name()).get({h});
}

void CapturedReader::element(const std::string& name, const long long* index, int rank, int64_t* out) const {
    const HostTensor& t = tensors->at(name);  // presence checked up front
    for (int d = 0; d < rank; ++d) {
        bool broadcast = t.size(d) == 1 && t.strides()[d] == 0;
        if (index[d] < 0 || (index[d] >= t.size(d) && !broadcast)) {
            std::ostringstream at;
            for (int e = 0; e < rank; ++e) at << (e ? ", " : "") << index[e];
            user_error << "tensor '" << name << "' is read at [" << at.str() << "] but is " << t.describe()
                       << ": index " << d << " is out of bounds; make dimension " << d
                       << " as large as the index range, or give it extent 1 and stride 0 to broadcast";
        }
        out[d] = broadcast ? 0 : index[d];
    }
}

double CapturedReader::operator()(const std::string& name, const long long* index, int rank) const {
    int64_t idx[8];
    element(name, index, rank, idx);
    return tensors->at(name).get(idx);
}

void row_scores(const dsl::AttentionSpec& spec, dsl::Env& env, const double* qi, const double* kb, int64_t nk,
                int64_t dqk, std::vector<char>& kept, std::vector<double>& s, std::vector<double>& t) {
    const dsl::Expr& score_mod = spec.score_mod();
    const dsl::Expr& mask = spec.mask();
    const double scale = spec.scale_or_default();
    kept.resize(static_cast<size_t>(nk));
    s.resize(static_cast<size_t>(nk));
    t.resize(static_cast<size_t>(nk));
    for (int64_t j = 0; j < nk; ++j) {
        env.kv_idx = j;
        kept[j] = !mask.defined() || dsl::interpret_bool(mask, env);
        if (!kept[j]) continue;
        const double* kj = kb + j * dqk;
        double dot = 0;
        for (int64_t d = 0; d < dqk; ++d) dot += qi[d] * kj[d];
        s[j] = scale * dot;
        if (score_mod.defined()) {
            env.score = s[j];
            t[j] = dsl::interpret_float(score_mod, env);
        } else {
            t[j] = s[j];
        }
    }
}

}  // namespace attnjit::reference
