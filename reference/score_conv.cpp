#include "reference/score_conv.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "codegen/autodiff.h"
#include "reference/attention_backward.h"
#include "reference/grad_partials.h"
#include "reference/inputs.h"
#include "reference/parallel.h"
#include "support/error.h"

namespace attnjit::reference {

void conv_row_scores(const dsl::AttentionSpec& spec, dsl::Env& env, const HostTensor& theta, const double* qb,
                     int64_t i, const double* kb, int64_t nq, int64_t nk, int64_t dqk, std::vector<char>& kept,
                     std::vector<double>& c, std::vector<double>& t) {
    internal_check(spec.has_score_conv() && i >= 0 && i < nq) << "conv_row_scores without a convolution";
    const int64_t cq = spec.score_conv_rows(), ck = spec.score_conv_cols(), pk = (ck - 1) / 2;
    const double scale = spec.scale_or_default();
    const dsl::Expr& mask = spec.mask();
    const int64_t h = env.h;
    // The window of rows the taps read: s0[a][j'] and mask[a][j'] for row i - (c_q - 1) + a.
    std::vector<std::vector<double>> s0(static_cast<size_t>(cq), std::vector<double>(static_cast<size_t>(nk), 0.0));
    std::vector<std::vector<char>> keep(static_cast<size_t>(cq), std::vector<char>(static_cast<size_t>(nk), 0));
    const int64_t q_row = env.q_idx;
    for (int64_t a = 0; a < cq; ++a) {
        const int64_t r = i - (cq - 1) + a;
        if (r < 0) continue;
        env.q_idx = r;
        const double* qr = qb + r * dqk;
        for (int64_t j = 0; j < nk; ++j) {
            env.kv_idx = j;
            keep[a][j] = !mask.defined() || dsl::interpret_bool(mask, env);
            if (!keep[a][j] || j > r) continue;
            const double* kj = kb + j * dqk;
            double dot = 0;
            for (int64_t d = 0; d < dqk; ++d) dot += qr[d] * kj[d];
            s0[a][j] = scale * dot;
        }
    }
    env.q_idx = q_row;
    const std::vector<char>& keep_i = keep[static_cast<size_t>(cq - 1)];  // mask(i, .)
    kept.assign(static_cast<size_t>(nk), 0);
    c.assign(static_cast<size_t>(nk), 0.0);
    t.assign(static_cast<size_t>(nk), 0.0);
    for (int64_t j = 0; j < nk; ++j) {
        kept[j] = j <= i && keep_i[j];
        if (!kept[j]) continue;
        double sum = 0;
        for (int64_t a = 0; a < cq; ++a) {
            if (i - (cq - 1) + a < 0 || !keep[a][j]) continue;  // row out of range, or mask(i', j) false
            for (int64_t b = 0; b < ck; ++b) {
                const int64_t jj = j - pk + b;
                if (jj < 0 || jj >= nk || !keep_i[jj]) continue;  // mask(i, j') false
                sum += theta.get({h, a, b}) * s0[a][jj];
            }
        }
        c[j] = sum;
        if (spec.score_mod().defined()) {
            env.kv_idx = j;
            env.score = sum;
            t[j] = dsl::interpret_float(spec.score_mod(), env);
        } else {
            t[j] = sum;
        }
    }
}

void conv_backward(const dsl::AttentionSpec& spec, const ForwardInputs& in, const ForwardResult& fwd,
                   const DoubleTensor& d_o, const codegen::ScoreModGradients& grads,
                   const std::set<std::string>& wanted, int threads, BackwardResult& out) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const int64_t B = in.q.size(0), Hq = in.q.size(1), Nq = in.q.size(2), Dqk = in.q.size(3);
    const int64_t Hkv = in.k.size(1), Nk = in.k.size(2), Dv = in.v.size(3);
    const int64_t cq = spec.score_conv_rows(), ck = spec.score_conv_cols(), pk = (ck - 1) / 2;
    const double scale = spec.scale_or_default();
    const std::string& theta_name = spec.score_conv_name();
    const HostTensor& theta = in.tensors.at(theta_name);
    const DoubleTensor q = to_double(in.q), k = to_double(in.k), v = to_double(in.v);
    const dsl::Expr& mask = spec.mask();
    const CapturedReader reader{&in.tensors};
    const bool want_theta = wanted.count(theta_name) > 0;
    const bool want_sinks = spec.has_sinks() && wanted.count(spec.sinks_name()) > 0;
    out.delta = DoubleTensor({B, Hq, Nq});
    out.dq = DoubleTensor({B, Hq, Nq, Dqk});
    out.dk = DoubleTensor({B, Hkv, Nk, Dqk});
    out.dv = DoubleTensor({B, Hkv, Nk, Dv});
    auto at = [Nk](int64_t i, int64_t j) { return static_cast<size_t>(i * Nk + j); };

    // Workers own whole (b, kv head) groups, as in the plain backward: dK and dV of a
    // group, dQ of its rows; d theta and the captured tensors' gradients go to Partials.
    const int64_t group = Hq / Hkv, groups = B * Hkv;
    const int workers = worker_count(groups, threads, 1);
    std::vector<Partials> partials(static_cast<size_t>(workers), zero_partials(in, wanted));
    parallel_ranges(groups, workers, [&](int worker, int64_t begin, int64_t end) {
        Partials& mine = partials[static_cast<size_t>(worker)];
        DoubleTensor* dtheta = want_theta ? &mine.dtensors.at(theta_name) : nullptr;
        dsl::Env env = reference_env(in, Nq, Nk);
        std::vector<double> s0(static_cast<size_t>(Nq * Nk)), dc(s0.size()), ds0(s0.size());
        std::vector<char> m(s0.size());
        std::vector<double> c_row, t_row;
        std::vector<char> kept_row;
        for (int64_t g = begin; g < end; ++g) {
            const int64_t b = g / Hkv, kvh = g % Hkv;
            const double* kb = &k.data[static_cast<size_t>(g * Nk * Dqk)];
            const double* vb = &v.data[static_cast<size_t>(g * Nk * Dv)];
            double* dkb = &out.dk.data[static_cast<size_t>(g * Nk * Dqk)];
            double* dvb = &out.dv.data[static_cast<size_t>(g * Nk * Dv)];
            for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
                env.b = b;
                env.h = h;
                env.kv_head = kvh;
                const double* qb = &q.data[static_cast<size_t>((b * Hq + h) * Nq * Dqk)];
                // S0 and the mask of the whole head (the taps read across rows).
                for (int64_t i = 0; i < Nq; ++i)
                    for (int64_t j = 0; j < Nk; ++j) {
                        env.q_idx = i;
                        env.kv_idx = j;
                        m[at(i, j)] = !mask.defined() || dsl::interpret_bool(mask, env);
                        double dot = 0;
                        for (int64_t d = 0; d < Dqk; ++d) dot += qb[i * Dqk + d] * kb[j * Dqk + d];
                        s0[at(i, j)] = m[at(i, j)] && j <= i ? scale * dot : 0.0;
                    }
                // Row by row: P from C and the forward's LSE, dT, then dC = dT * d score_mod /
                // d s at C; score_mod's other reads take dT at C's position, as without a
                // convolution.
                for (int64_t i = 0; i < Nq; ++i) {
                    const int64_t row = (b * Hq + h) * Nq + i;
                    const double* doi = &d_o.data[static_cast<size_t>(row * Dv)];
                    const double* oi = &fwd.o.data[static_cast<size_t>(row * Dv)];
                    double delta = 0;
                    for (int64_t d = 0; d < Dv; ++d) delta += doi[d] * oi[d];
                    out.delta.data[static_cast<size_t>(row)] = delta;
                    const double lse = fwd.lse.data[static_cast<size_t>(row)];
                    if (want_sinks) {
                        const double sink = sink_logit(spec, in, h);
                        if (sink != -kInf)  // a -inf sink is no sink: no gradient
                            mine.dtensors.at(spec.sinks_name()).data[static_cast<size_t>(h)] -=
                                std::exp(sink - lse) * delta;
                    }
                    std::fill(dc.begin() + static_cast<std::ptrdiff_t>(at(i, 0)),
                              dc.begin() + static_cast<std::ptrdiff_t>(at(i, 0) + Nk), 0.0);
                    if (lse == -kInf) continue;  // no kept key: zero gradients
                    env.q_idx = i;
                    conv_row_scores(spec, env, theta, qb, i, kb, Nq, Nk, Dqk, kept_row, c_row, t_row);
                    for (int64_t j = 0; j < Nk; ++j) {
                        if (!kept_row[j] || t_row[j] == -kInf) continue;
                        const double p = std::exp(t_row[j] - lse);
                        double dp = 0;
                        for (int64_t d = 0; d < Dv; ++d) {
                            dp += doi[d] * vb[j * Dv + d];
                            dvb[j * Dv + d] += p * doi[d];
                        }
                        const double dt = p * (dp - delta);
                        env.kv_idx = j;
                        env.score = c_row[j];
                        dc[at(i, j)] = dt * dsl::interpret_float(grads.d_score, env);
                        add_score_mod_grads(grads, reader, env, dt, mine);
                    }
                }
                // The transposed convolution, tap by tap (the forward's taps, read backwards).
                std::fill(ds0.begin(), ds0.end(), 0.0);
                for (int64_t i = 0; i < Nq; ++i)
                    for (int64_t j = 0; j < Nk; ++j) {
                        const double gc = dc[at(i, j)];
                        if (gc == 0) continue;
                        for (int64_t a = 0; a < cq; ++a) {
                            const int64_t ii = i - (cq - 1) + a;
                            if (ii < 0 || !m[at(ii, j)]) continue;  // mask(i', j)
                            for (int64_t bb = 0; bb < ck; ++bb) {
                                const int64_t jj = j - pk + bb;
                                if (jj < 0 || jj >= Nk || !m[at(i, jj)]) continue;  // mask(i, j')
                                ds0[at(ii, jj)] += theta.get({h, a, bb}) * gc;
                                if (dtheta) dtheta->at({h, a, bb}) += gc * s0[at(ii, jj)];
                            }
                        }
                    }
                for (int64_t i = 0; i < Nq; ++i) {
                    double* dqi = &out.dq.data[static_cast<size_t>(((b * Hq + h) * Nq + i) * Dqk)];
                    for (int64_t j = 0; j <= std::min(i, Nk - 1); ++j) {
                        if (!m[at(i, j)]) continue;  // dS = dS0 where keep0
                        const double ds = scale * ds0[at(i, j)];
                        for (int64_t d = 0; d < Dqk; ++d) {
                            dqi[d] += ds * kb[j * Dqk + d];
                            dkb[j * Dqk + d] += ds * qb[i * Dqk + d];
                        }
                    }
                }
            }
        }
    });
    merge_partials(partials, out);
}

}  // namespace attnjit::reference
