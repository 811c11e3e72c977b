#include "reference/reciprocal_band.h"

namespace attnjit::reference {

bool in_reciprocal_band(const dsl::AttentionSpec& spec, int64_t i, int64_t j) {
    const int64_t d = i - j, w = spec.reciprocal_band_width();
    return spec.reciprocal_band_causal() ? d >= 0 && d <= w : d >= -w && d <= w;
}

void band_row_scores(const dsl::AttentionSpec& spec, dsl::Env& env, double alpha, const double* qb, int64_t i,
                     const double* kb, int64_t n, int64_t dqk, std::vector<char>& kept, std::vector<double>& r,
                     std::vector<double>& t) {
    const dsl::Expr& score_mod = spec.score_mod();
    const dsl::Expr& mask = spec.mask();
    const double scale = spec.scale_or_default();
    kept.resize(static_cast<size_t>(n));
    r.resize(static_cast<size_t>(n));
    t.resize(static_cast<size_t>(n));
    auto dot = [dqk](const double* a, const double* b) {
        double s = 0;
        for (int64_t d = 0; d < dqk; ++d) s += a[d] * b[d];
        return s;
    };
    for (int64_t j = 0; j < n; ++j) {
        env.kv_idx = j;
        kept[j] = (!spec.reciprocal_band_causal() || j <= i) && (!mask.defined() || dsl::interpret_bool(mask, env));
        if (!kept[j]) continue;
        double s = dot(qb + i * dqk, kb + j * dqk);
        if (in_reciprocal_band(spec, i, j)) s += alpha * dot(qb + j * dqk, kb + i * dqk);
        r[j] = scale * s;
        if (score_mod.defined()) {
            env.score = r[j];
            t[j] = dsl::interpret_float(score_mod, env);
        } else {
            t[j] = r[j];
        }
    }
}

}  // namespace attnjit::reference
