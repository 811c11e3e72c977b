#include "reference/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "dsl/interpreter.h"
#include "reference/gate.h"
#include "reference/inputs.h"
#include "reference/latent.h"
#include "reference/reciprocal_band.h"
#include "reference/score_conv.h"
#include "reference/parallel.h"
#include "support/error.h"

namespace attnjit::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string shape_str(const std::vector<int64_t>& s) {
    std::ostringstream o;
    o << "[";
    for (size_t d = 0; d < s.size(); ++d) o << (d ? ", " : "") << s[d];
    o << "]";
    return o.str();
}

}  // namespace

DoubleTensor::DoubleTensor(std::vector<int64_t> s) : shape(std::move(s)) {
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    data.assign(static_cast<size_t>(n), 0.0);
}

int64_t DoubleTensor::offset_of(const int64_t* index) const {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + index[d];
    return off;
}

DoubleTensor to_double(const HostTensor& t) {
    DoubleTensor out(t.shape());
    int64_t n = 0;
    t.for_each_index([&](const int64_t* idx) { out.data[n++] = t.get(idx); });
    return out;
}

ForwardResult attend(const dsl::AttentionSpec& spec, const ForwardInputs& in, const DoubleTensor& q,
                     const DoubleTensor& k, const DoubleTensor& v, int threads) {
    const int64_t B = q.shape[0], Hq = q.shape[1], Nq = q.shape[2], Dqk = q.shape[3];
    const int64_t Hkv = k.shape[1], Nk = k.shape[2], Dv = v.shape[3];
    ForwardResult out{DoubleTensor({B, Hq, Nq, Dv}), DoubleTensor({B, Hq, Nq})};
    const int64_t group = Hkv > 0 ? Hq / Hkv : 1;
    const int64_t rows = B * Hq * Nq;

    auto run_rows = [&](int64_t begin, int64_t end) {
        dsl::Env env = reference_env(in, Nq, Nk);
        std::vector<double> sc, t;
        std::vector<char> kept;
        for (int64_t row = begin; row < end; ++row) {
            const int64_t i = row % Nq, h = (row / Nq) % Hq, b = row / (Nq * Hq);
            const int64_t kvh = h / group;
            env.b = b;
            env.h = h;
            env.kv_head = kvh;
            env.q_idx = i;
            const double* qi = &q.data[static_cast<size_t>(row * Dqk)];
            const double* kb = &k.data[static_cast<size_t>((b * Hkv + kvh) * Nk * Dqk)];
            const double* vb = &v.data[static_cast<size_t>((b * Hkv + kvh) * Nk * Dv)];
            if (spec.has_score_conv())
                conv_row_scores(spec, env, in.tensors.at(spec.score_conv_name()), qi - i * Dqk, i, kb, Nq, Nk, Dqk, kept,
                                sc, t);
            else if (spec.has_reciprocal_band())
                band_row_scores(spec, env, in.tensors.at(spec.reciprocal_band_alpha()).get({h}), qi - i * Dqk, i, kb,
                                Nk, Dqk, kept, sc, t);
            else
                row_scores(spec, env, qi, kb, Nk, Dqk, kept, sc, t);
            // Attention sinks: the sink logit joins the denominator and takes no value
            // (-inf: no sink).
            const double sink = sink_logit(spec, in, h);
            double m = sink;
            bool nan = std::isnan(sink);
            for (int64_t j = 0; j < Nk; ++j) {
                if (!kept[j]) continue;
                if (std::isnan(t[j])) nan = true;
                else m = std::max(m, t[j]);
            }
            double* o = &out.o.data[static_cast<size_t>(row * Dv)];
            double& lse = out.lse.data[static_cast<size_t>(row)];
            if (nan || m == kInf) {  // exp(inf - inf): undefined, as in any kernel
                std::fill(o, o + Dv, kNaN);
                lse = kNaN;
                continue;
            }
            if (m == -kInf) {  // no kept key, or every kept score is -inf (and no sink)
                std::fill(o, o + Dv, 0.0);
                lse = -kInf;
                continue;
            }
            double l = std::exp(sink - m);  // 0 without a sink
            for (int64_t j = 0; j < Nk; ++j)
                if (kept[j]) l += std::exp(t[j] - m);
            lse = m + std::log(l);
            std::fill(o, o + Dv, 0.0);
            for (int64_t j = 0; j < Nk; ++j) {
                if (!kept[j] || t[j] == -kInf) continue;
                double p = std::exp(t[j] - m) / l;
                const double* vj = vb + j * Dv;
                for (int64_t d = 0; d < Dv; ++d) o[d] += p * vj[d];
            }
        }
    };

    parallel_ranges(rows, worker_count(rows, threads, 16), [&](int, int64_t begin, int64_t end) { run_rows(begin, end); });
    return out;
}

ForwardResult forward(const dsl::AttentionSpec& spec, const ForwardInputs& in, int threads) {
    const Dims x = check_inputs(spec, in, "reference::forward");
    // Decode Q, K, V once into contiguous doubles (the values as stored in their dtype).
    const DoubleTensor q = to_double(in.q), k = to_double(in.k), v = to_double(in.v);
    ForwardResult out;
    if (spec.has_latent()) {  // MLA: the attention at width L between the two projections
        out = attend(spec, in, project(q, in.tensors.at(spec.latent_w_qlat()), threads), k, v, threads);
        out.o = project(out.o, in.tensors.at(spec.latent_w_vup()), threads);
    } else {
        out = attend(spec, in, q, k, v, threads);
    }
    if (spec.has_gate()) {  // out = sigmoid(gate) * O; a row left NaN, or empty without a sink, stays so
        const HostTensor& g = in.tensors.at(spec.gate_name());
        for (int64_t row = 0; row < x.B * x.Hq * x.Nq; ++row) {
            if (!std::isfinite(out.lse.data[static_cast<size_t>(row)])) continue;
            const int64_t i = row % x.Nq, h = (row / x.Nq) % x.Hq, b = row / (x.Nq * x.Hq);
            double* o = &out.o.data[static_cast<size_t>(row * x.Dv)];
            for (int64_t d = 0; d < x.Dv; ++d) o[d] *= gate_factor(g, b, h, i, d);
        }
    }
    return out;
}

// ---- comparison ----------------------------------------------------------------------

namespace {

std::string index_str(const std::vector<int64_t>& shape, int64_t flat) {
    std::vector<int64_t> idx(shape.size());
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        idx[d] = shape[d] ? flat % shape[d] : 0;
        flat = shape[d] ? flat / shape[d] : 0;
    }
    return shape_str(idx);
}

// Shared by both compare() overloads: `actual(n)` gives the n-th value (row-major), and
// `poison(n)` whether it still holds the poison pattern.
template <class Get, class Poison>
Comparison compare_impl(const std::vector<int64_t>& actual_shape, const DoubleTensor& expected, Tolerance tol,
                        Get actual, Poison poison) {
    Comparison c;
    if (actual_shape != expected.shape) {
        c.ok = false;
        c.report = "shape mismatch: actual " + shape_str(actual_shape) + ", expected " + shape_str(expected.shape);
        return c;
    }
    std::ostringstream first;
    int shown = 0;
    auto note = [&](int64_t n, const char* why, double a, double e) {
        if (shown++ < 8)
            first << "  at " << index_str(expected.shape, n) << ": actual " << a << ", expected " << e << " ("
                  << why << ")\n";
    };
    for (int64_t n = 0; n < expected.numel(); ++n) {
        ++c.checked;
        double e = expected.data[static_cast<size_t>(n)];
        if (poison(n)) {
            ++c.poisoned;
            note(n, "never written", std::nan(""), e);
            continue;
        }
        double a = actual(n);
        if (std::isnan(a) || std::isnan(e)) {
            ++c.nans;
            note(n, std::isnan(e) ? "NaN in the reference" : "NaN", a, e);
            continue;
        }
        if (std::isinf(a) || std::isinf(e)) {
            if (a != e) {
                ++c.failures;
                c.max_abs_error = kInf;
                c.max_rel_error = kInf;
                note(n, "infinity mismatch", a, e);
            }
            continue;
        }
        double diff = std::fabs(a - e);
        c.max_abs_error = std::max(c.max_abs_error, diff);
        c.max_rel_error = std::max(c.max_rel_error, diff / std::max(std::fabs(e), kRelativeErrorFloor));
        if (!(diff <= tol.atol + tol.rtol * std::fabs(e))) {
            ++c.failures;
            note(n, "outside tolerance", a, e);
        }
    }
    c.ok = c.failures == 0 && c.nans == 0 && c.poisoned == 0;
    if (!c.ok) {
        std::ostringstream r;
        r << c.failures << " of " << c.checked << " elements outside atol " << tol.atol << " + rtol " << tol.rtol
          << " * |expected|, " << c.nans << " NaN, " << c.poisoned << " never written; max abs error "
          << c.max_abs_error << ", max rel error " << c.max_rel_error << "\n"
          << first.str();
        c.report = r.str();
    }
    return c;
}

}  // namespace

Comparison compare(const HostTensor& actual, const DoubleTensor& expected, Tolerance tol) {
    std::vector<double> values;
    std::vector<char> poisoned;
    actual.for_each_index([&](const int64_t* idx) {
        values.push_back(actual.get(idx));
        poisoned.push_back(is_poison(actual, idx));
    });
    return compare_impl(
        actual.shape(), expected, tol, [&](int64_t n) { return values[static_cast<size_t>(n)]; },
        [&](int64_t n) { return poisoned[static_cast<size_t>(n)] != 0; });
}

Comparison compare(const DoubleTensor& actual, const DoubleTensor& expected, Tolerance tol) {
    return compare_impl(
        actual.shape, expected, tol, [&](int64_t n) { return actual.data[static_cast<size_t>(n)]; },
        [](int64_t) { return false; });
}

namespace {

// The largest err(a, e) over all elements: NaN if either side has a NaN, inf where the
// two disagree on an infinity, equal infinities count as exact.
template <class Err>
double max_error(const char* what, const DoubleTensor& actual, const DoubleTensor& expected, Err err) {
    user_check(actual.shape == expected.shape) << what << ": shapes " << shape_str(actual.shape) << " and "
                                               << shape_str(expected.shape) << " differ";
    double worst = 0;
    for (size_t n = 0; n < actual.data.size(); ++n) {
        double a = actual.data[n], e = expected.data[n];
        if (std::isnan(a) || std::isnan(e)) return kNaN;
        if (std::isinf(a) || std::isinf(e)) {
            if (a != e) worst = kInf;
            continue;
        }
        worst = std::max(worst, err(a, e));
    }
    return worst;
}

}  // namespace

double max_abs_error(const DoubleTensor& actual, const DoubleTensor& expected) {
    return max_error("max_abs_error", actual, expected, [](double a, double e) { return std::fabs(a - e); });
}

double max_rel_error(const DoubleTensor& actual, const DoubleTensor& expected, double floor) {
    return max_error("max_rel_error", actual, expected,
                     [floor](double a, double e) { return std::fabs(a - e) / std::max(std::fabs(e), floor); });
}

}  // namespace attnjit::reference
