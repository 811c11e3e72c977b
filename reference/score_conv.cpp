#include "reference/score_conv.h"

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

}  // namespace attnjit::reference
