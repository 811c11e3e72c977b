#include "reference/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <sstream>
#include <thread>

#include "dsl/interpreter.h"
#include "dsl/printer.h"
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

void check_qkv(const HostTensor& t, const char* name, const char* layout, DType dtype) {
    user_check(t.rank() == 4) << "reference::forward: " << name << " has rank " << t.rank() << " ("
                              << t.describe() << "); it must be " << layout;
    user_check(t.dtype() == dtype) << "reference::forward: " << name << " has dtype " << dtype_name(t.dtype())
                                   << " but the spec's dtype is " << dtype_name(dtype);
}

// Reads captured tensors for the interpreter, with bounds checks (broadcast: extent 1, stride 0).
struct CapturedReader {
    const std::map<std::string, HostTensor>* tensors;

    double operator()(const std::string& name, const long long* index, int rank) const {
        const HostTensor& t = tensors->at(name);  // presence checked up front
        int64_t idx[8];
        for (int d = 0; d < rank; ++d) {
            bool broadcast = t.size(d) == 1 && t.strides()[d] == 0;
            if (index[d] < 0 || (index[d] >= t.size(d) && !broadcast)) {
                std::ostringstream at;
                for (int e = 0; e < rank; ++e) at << (e ? ", " : "") << index[e];
                user_error << "tensor '" << name << "' is read at [" << at.str() << "] but is "
                           << t.describe() << ": index " << d << " is out of bounds; make dimension " << d
                           << " as large as the index range, or give it extent 1 and stride 0 to broadcast";
            }
            idx[d] = broadcast ? 0 : index[d];
        }
        return t.get(idx);
    }
};

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

ForwardResult forward(const dsl::AttentionSpec& spec, const ForwardInputs& in, int threads) {
    spec.validate();
    const DType dt = spec.dtype();
    check_qkv(in.q, "q", "[B, Hq, Nq, Dqk]", dt);
    check_qkv(in.k, "k", "[B, Hkv, Nk, Dqk]", dt);
    check_qkv(in.v, "v", "[B, Hkv, Nk, Dv]", dt);
    const int64_t B = in.q.size(0), Hq = in.q.size(1), Nq = in.q.size(2), Dqk = in.q.size(3);
    const int64_t Hkv = in.k.size(1), Nk = in.k.size(2), Dv = in.v.size(3);
    user_check(Dqk == spec.head_dim_qk() && in.k.size(3) == Dqk)
        << "reference::forward: q " << in.q.describe() << " and k " << in.k.describe()
        << " must have head dim " << spec.head_dim_qk() << " (the spec's)";
    user_check(Dv == spec.head_dim_v()) << "reference::forward: v " << in.v.describe() << " must have head dim "
                                        << spec.head_dim_v() << " (the spec's)";
    user_check(in.k.size(0) == B && in.v.size(0) == B)
        << "reference::forward: batch differs: q " << in.q.describe() << ", k " << in.k.describe() << ", v "
        << in.v.describe();
    user_check(in.v.size(1) == Hkv && in.v.size(2) == Nk)
        << "reference::forward: k " << in.k.describe() << " and v " << in.v.describe()
        << " must have the same heads and length";
    user_check(Hkv > 0 && Hq % Hkv == 0) << "reference::forward: q has " << Hq << " heads, k has " << Hkv
                                         << "; query heads must be a multiple of key/value heads";
    if (spec.q_heads() > 0)
        user_check(Hq == spec.q_heads() && Hkv == spec.kv_heads())
            << "reference::forward: q/k heads " << Hq << "/" << Hkv << " differ from the spec's "
            << spec.q_heads() << "/" << spec.kv_heads();

    for (const auto& [name, info] : spec.tensors()) {
        auto it = in.tensors.find(name);
        user_check(it != in.tensors.end()) << "reference::forward: captured tensor '" << name
                                           << "' is read by the spec but not given";
        user_check(it->second.dtype() == info.dtype && it->second.rank() == info.rank)
            << "reference::forward: tensor '" << name << "' is " << it->second.describe() << " but the spec reads a "
            << dtype_name(info.dtype) << " tensor of rank " << info.rank;
    }
    auto spec_tensors = spec.tensors();
    for (const auto& [name, t] : in.tensors)
        user_check(spec_tensors.count(name)) << "reference::forward: tensor '" << name
                                             << "' is given but the spec does not read it";
    auto spec_scalars = spec.scalars();
    for (const auto& [name, type] : spec_scalars) {
        auto it = in.scalars.find(name);
        user_check(it != in.scalars.end()) << "reference::forward: scalar '" << name
                                           << "' is read by the spec but not given";
        if (type == dsl::Type::Int)
            user_check(std::isfinite(it->second) && it->second == std::trunc(it->second))
                << "reference::forward: int scalar '" << name << "' = " << it->second << " is not an integer";
    }
    for (const auto& [name, v] : in.scalars)
        user_check(spec_scalars.count(name)) << "reference::forward: scalar '" << name
                                             << "' is given but the spec does not read it";

    // Decode Q, K, V once into contiguous doubles (the values as stored in their dtype).
    const DoubleTensor q = to_double(in.q), k = to_double(in.k), v = to_double(in.v);
    ForwardResult out{DoubleTensor({B, Hq, Nq, Dv}), DoubleTensor({B, Hq, Nq})};
    const double scale = spec.scale_or_default();
    const dsl::Expr& score_mod = spec.score_mod();
    const dsl::Expr& mask = spec.mask();
    const int64_t group = Hkv > 0 ? Hq / Hkv : 1;
    const int64_t rows = B * Hq * Nq;

    auto run_rows = [&](int64_t begin, int64_t end) {
        dsl::Env env;
        env.scalars = in.scalars;
        env.load = CapturedReader{&in.tensors};
        env.q_len = Nq;
        env.kv_len = Nk;
        std::vector<double> t(static_cast<size_t>(Nk));
        std::vector<char> kept(static_cast<size_t>(Nk));
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
            double m = -kInf;
            bool nan = false;
            for (int64_t j = 0; j < Nk; ++j) {
                env.kv_idx = j;
                kept[j] = !mask.defined() || dsl::interpret_bool(mask, env);
                if (!kept[j]) continue;
                const double* kj = kb + j * Dqk;
                double dot = 0;
                for (int64_t d = 0; d < Dqk; ++d) dot += qi[d] * kj[d];
                double s = scale * dot;
                if (score_mod.defined()) {
                    env.score = s;
                    s = dsl::interpret_float(score_mod, env);
                }
                t[j] = s;
                if (std::isnan(s)) nan = true;
                else m = std::max(m, s);
            }
            double* o = &out.o.data[static_cast<size_t>(row * Dv)];
            double& lse = out.lse.data[static_cast<size_t>(row)];
            if (nan || m == kInf) {  // exp(inf - inf): undefined, as in any kernel
                std::fill(o, o + Dv, kNaN);
                lse = kNaN;
                continue;
            }
            if (m == -kInf) {  // no kept key, or every kept score is -inf
                std::fill(o, o + Dv, 0.0);
                lse = -kInf;
                continue;
            }
            double l = 0;
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

    int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n = static_cast<int>(std::min<int64_t>(n, std::max<int64_t>(rows / 16, 1)));
    if (n <= 1) {
        run_rows(0, rows);
        return out;
    }
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
    for (int w = 0; w < n; ++w) {
        int64_t begin = rows * w / n, end = rows * (w + 1) / n;
        pool.emplace_back([&, w, begin, end] {
            try {
                run_rows(begin, end);
            } catch (...) {
                errors[static_cast<size_t>(w)] = std::current_exception();
            }
        });
    }
    for (auto& th : pool) th.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
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
