#include "reference/attention_backward.h"

#include <cmath>
#include <limits>

#include "codegen/autodiff.h"
#include "dsl/interpreter.h"
#include "reference/gate.h"
#include "reference/grad_partials.h"
#include "reference/inputs.h"
#include "reference/latent.h"
#include "reference/parallel.h"
#include "reference/reciprocal_band.h"
#include "reference/score_conv.h"
#include "support/error.h"

namespace attnjit::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// SEMANTICS.md section 2 row by row, on the operands q, k, v in double (as attend() takes
// them), from the ungated forward `fwd` and dO of the ungated output. Workers own whole
// (b, kv head) groups: dK and dV of a group, dQ of its rows.
void plain_backward(const dsl::AttentionSpec& spec, const ForwardInputs& in, const DoubleTensor& q,
                    const DoubleTensor& k, const DoubleTensor& v, const ForwardResult& fwd, const DoubleTensor& dout,
                    const codegen::ScoreModGradients& grads, const std::set<std::string>& wanted, int threads,
                    BackwardResult& out) {
    const int64_t B = q.shape[0], Hq = q.shape[1], Nq = q.shape[2], Dqk = q.shape[3];
    const int64_t Hkv = k.shape[1], Nk = k.shape[2], Dv = v.shape[3];
    out.delta = DoubleTensor({B, Hq, Nq});
    out.dq = DoubleTensor({B, Hq, Nq, Dqk});
    out.dk = DoubleTensor({B, Hkv, Nk, Dqk});
    out.dv = DoubleTensor({B, Hkv, Nk, Dv});
    const double scale = spec.scale_or_default();
    const int64_t group = Hq / Hkv;
    const CapturedReader reader{&in.tensors};
    // Attention sinks: d sink_h = -sum_{b, i} exp(sink_h - LSE_i) Delta_i, when asked for.
    const bool want_sinks = spec.has_sinks() && wanted.count(spec.sinks_name()) > 0;
    // The reciprocal band (T_ij = s_ij + alpha_h band(i, j) s_ji, Nq == Nk): dS_ij also reaches
    // q_j and k_i, and d alpha_h = sum dS_ij band(i, j) s_ji.
    const bool band = spec.has_reciprocal_band();
    const bool want_alpha = band && wanted.count(spec.reciprocal_band_alpha()) > 0;

    const int64_t groups = B * Hkv;
    const int workers = worker_count(groups, threads, 1);
    std::vector<Partials> partials(static_cast<size_t>(workers), zero_partials(in, wanted));
    parallel_ranges(groups, workers, [&](int worker, int64_t begin, int64_t end) {
        Partials& mine = partials[static_cast<size_t>(worker)];
        dsl::Env env = reference_env(in, Nq, Nk);
        std::vector<double> s, t;
        std::vector<char> kept;
        for (int64_t g = begin; g < end; ++g) {
            const int64_t b = g / Hkv, kvh = g % Hkv;
            const double* kb = &k.data[static_cast<size_t>(g * Nk * Dqk)];
            const double* vb = &v.data[static_cast<size_t>(g * Nk * Dv)];
            double* dkb = &out.dk.data[static_cast<size_t>(g * Nk * Dqk)];
            double* dvb = &out.dv.data[static_cast<size_t>(g * Nk * Dv)];
            for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
                for (int64_t i = 0; i < Nq; ++i) {
                    const int64_t row = (b * Hq + h) * Nq + i;
                    env.b = b;
                    env.h = h;
                    env.kv_head = kvh;
                    env.q_idx = i;
                    const double* qi = &q.data[static_cast<size_t>(row * Dqk)];
                    const double* oi = &fwd.o.data[static_cast<size_t>(row * Dv)];
                    const double* doi = &dout.data[static_cast<size_t>(row * Dv)];
                    double* dqi = &out.dq.data[static_cast<size_t>(row * Dqk)];
                    const double lse = fwd.lse.data[static_cast<size_t>(row)];
                    double delta = 0;
                    for (int64_t d = 0; d < Dv; ++d) delta += doi[d] * oi[d];
                    out.delta.data[static_cast<size_t>(row)] = delta;
                    if (want_sinks) {
                        const double sink = sink_logit(spec, in, h);
                        if (sink != -kInf)  // a -inf sink is no sink: no gradient
                            mine.dtensors.at(spec.sinks_name()).data[static_cast<size_t>(h)] -=
                                std::exp(sink - lse) * delta;
                    }
                    if (lse == -kInf) continue;  // no kept key: zero gradients
                    const double* qb = qi - i * Dqk;  // the head's query rows (the band reads q_j)
                    const double alpha = band ? in.tensors.at(spec.reciprocal_band_alpha()).get({h}) : 0.0;
                    if (band)
                        band_row_scores(spec, env, alpha, qb, i, kb, Nk, Dqk, kept, s, t);
                    else
                        row_scores(spec, env, qi, kb, Nk, Dqk, kept, s, t);
                    for (int64_t j = 0; j < Nk; ++j) {
                        if (!kept[j] || t[j] == -kInf) continue;
                        env.kv_idx = j;
                        env.score = s[j];
                        const double p = std::exp(t[j] - lse);
                        const double* vj = vb + j * Dv;
                        double dp = 0;
                        for (int64_t d = 0; d < Dv; ++d) dp += doi[d] * vj[d];
                        const double dt = p * (dp - delta);
                        const double ds = dt * dsl::interpret_float(grads.d_score, env);
                        double* dvj = dvb + j * Dv;
                        for (int64_t d = 0; d < Dv; ++d) dvj[d] += p * doi[d];
                        const double* kj = kb + j * Dqk;
                        double* dkj = dkb + j * Dqk;
                        for (int64_t d = 0; d < Dqk; ++d) {
                            dqi[d] += scale * ds * kj[d];
                            dkj[d] += scale * ds * qi[d];
                        }
                        if (band && in_reciprocal_band(spec, i, j)) {  // through s_ji = scale <q_j, k_i>
                            const double* qj = qb + j * Dqk;
                            const double* ki = kb + i * Dqk;
                            double* dqj = dqi + (j - i) * Dqk;
                            double* dki = dkb + i * Dqk;
                            double dot = 0;
                            for (int64_t d = 0; d < Dqk; ++d) {
                                dqj[d] += scale * alpha * ds * ki[d];
                                dki[d] += scale * alpha * ds * qj[d];
                                dot += qj[d] * ki[d];
                            }
                            if (want_alpha)
                                mine.dtensors.at(spec.reciprocal_band_alpha()).data[static_cast<size_t>(h)] +=
                                    ds * scale * dot;
                        }
                        add_score_mod_grads(grads, reader, env, dt, mine);
                    }
                }
        }
    });
    merge_partials(partials, out);
}

// MLA (reference/latent.h): the plain backward at width L between the two projections, on
// Q_lat and with dO_lat = dO w_vup[h]^T (dO of the ungated output); its dQ_lat gives
// dq = dQ_lat w_qlat[h]^T. d w_vup and d w_qlat add to what score_mod's reads of them gave.
void latent_backward(const dsl::AttentionSpec& spec, const ForwardInputs& in, const DoubleTensor& dout,
                     const codegen::ScoreModGradients& grads, const std::set<std::string>& wanted, int threads,
                     BackwardResult& out) {
    const HostTensor& w_qlat = in.tensors.at(spec.latent_w_qlat());
    const HostTensor& w_vup = in.tensors.at(spec.latent_w_vup());
    const DoubleTensor q = to_double(in.q), k = to_double(in.k), v = to_double(in.v);
    const DoubleTensor q_lat = project(q, w_qlat, threads);
    const ForwardResult lat = attend(spec, in, q_lat, k, v, threads);  // O_lat and LSE
    const bool want_vup = wanted.count(spec.latent_w_vup()) > 0;
    DoubleTensor d_w_vup(w_vup.shape());
    const DoubleTensor d_o_lat = project_backward(lat.o, w_vup, dout, want_vup ? &d_w_vup : nullptr, threads);
    plain_backward(spec, in, q_lat, k, v, lat, d_o_lat, grads, wanted, threads, out);  // out.dq: dQ_lat
    DoubleTensor* d_w_qlat = wanted.count(spec.latent_w_qlat()) ? &out.dtensors.at(spec.latent_w_qlat()) : nullptr;
    out.dq = project_backward(q, w_qlat, out.dq, d_w_qlat, threads);
    if (want_vup) {
        auto& total = out.dtensors.at(spec.latent_w_vup()).data;
        for (size_t n = 0; n < total.size(); ++n) total[n] += d_w_vup.data[n];
    }
}

}  // namespace

BackwardResult backward(const dsl::AttentionSpec& spec, const ForwardInputs& in, const HostTensor& d_o,
                        const std::set<std::string>& wanted, int threads) {
    const Dims x = check_inputs(spec, in, "reference::backward");
    const int64_t B = x.B, Hq = x.Hq, Nq = x.Nq, Dv = x.Dv;
    user_check(d_o.rank() == 4 && d_o.size(0) == B && d_o.size(1) == Hq && d_o.size(2) == Nq && d_o.size(3) == Dv)
        << "reference::backward: d_o is " << d_o.describe() << "; it must be [B, Hq, Nq, Dv] = [" << B << ", " << Hq
        << ", " << Nq << ", " << Dv << "] like the output";
    user_check(d_o.dtype() == spec.dtype()) << "reference::backward: d_o has dtype " << dtype_name(d_o.dtype())
                                            << " but the spec's dtype is " << dtype_name(spec.dtype());
    const codegen::ScoreModGradients grads = codegen::score_mod_gradients(spec, wanted);

    BackwardResult out;
    out.forward = forward(spec, in, threads);
    DoubleTensor dout = to_double(d_o);
    // An output gate: the attention's backward runs on the ungated O with dO * sigmoid(g),
    // and d g = dOut O sigmoid(g) (1 - sigmoid(g)) (SEMANTICS.md section 5).
    ForwardResult ungated_result;
    DoubleTensor d_gate;
    if (spec.has_gate()) {
        const dsl::AttentionSpec ungated_spec = dsl::AttentionSpec(spec).no_gate();
        ForwardInputs plain = in;
        if (!ungated_spec.tensors().count(spec.gate_name()))  // unless score_mod or mask reads it too
            plain.tensors.erase(spec.gate_name());
        ungated_result = forward(ungated_spec, plain, threads);
        d_gate = gate_backward(in.tensors.at(spec.gate_name()), ungated_result.o, dout);
    }
    const ForwardResult& ungated = spec.has_gate() ? ungated_result : out.forward;
    if (spec.has_score_conv())
        conv_backward(spec, in, ungated, dout, grads, wanted, threads, out);
    else if (spec.has_latent())
        latent_backward(spec, in, dout, grads, wanted, threads, out);
    else
        plain_backward(spec, in, to_double(in.q), to_double(in.k), to_double(in.v), ungated, dout, grads, wanted,
                       threads, out);
    if (spec.has_gate() && wanted.count(spec.gate_name())) {  // adds to what score_mod's reads gave
        auto& total = out.dtensors.at(spec.gate_name()).data;
        for (size_t n = 0; n < total.size(); ++n) total[n] += d_gate.data[n];
    }
    return out;
}

}  // namespace attnjit::reference
