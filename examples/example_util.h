// What every example does after building its spec, kept out of the examples so each one
// reads as "the variant in a few DSL lines":
//
//  - with a GPU: check the kernel against the fp64 CPU reference on a small problem
//    (fresh random inputs, poisoned outputs), print the max error, then time it on a
//    large problem (warm-up, then synchronised host timing over repeated launches) and
//    print the time per call and TFLOP/s;
//  - without one: compile for sm_90a only and say why nothing ran.
//
// Exit status: 0 when the check passed (or only compiled), 1 when the error exceeds the
// reference's tolerance for the dtype, 2 on an exception, 77 (skipped) with neither a GPU
// nor NVRTC.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "reference/attention_reference.h"
#include "reference/host_tensor.h"
#include "api/attention.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"

namespace attnjit::examples {

using reference::HostTensor;

struct Dims {
    int64_t batch, q_heads, kv_heads, q_len, kv_len;
};

// Adds the spec's captured tensors and runtime scalars for a problem of these dims.
using AddInputs = std::function<void(reference::ForwardInputs& in, const Dims& dims, uint64_t seed)>;

struct Example {
    std::string title;            // one line: what the variant is
    dsl::AttentionSpec spec;
    Dims check;                   // compared with the fp64 reference (keep it small)
    Dims timed;                   // timed (large enough to fill the GPU)
    AddInputs add_inputs = [](reference::ForwardInputs&, const Dims&, uint64_t) {};
    // Q, K, V and O as [B, N, H, D] in memory (AlphaFold's and most training stacks'
    // token-major layout), passed as [B, H, N, D] views through strides: no copy.
    bool tokens_major = false;
    int warmup = 5;
    int iterations = 50;
};

namespace detail {

struct OnDevice {
    reference::ForwardInputs in;
    HostTensor o, lse;
    runtime::DeviceTensor q, k, v, d_o, d_lse;
    std::map<std::string, runtime::DeviceTensor> tensors;

    LaunchArgs args() const {
        LaunchArgs a;
        a.q = q.view;
        a.k = k.view;
        a.v = v.view;
        a.o = d_o.view;
        if (!lse.shape().empty()) a.lse = d_lse.view;
        for (const auto& [name, t] : tensors) a.tensors[name] = t.view;
        a.scalars = in.scalars;
        return a;
    }
};

// A [B, H, N, D] tensor, laid out [B, N, H, D] in memory when tokens_major.
inline HostTensor bhnd_tensor(DType dt, int64_t b, int64_t h, int64_t n, int64_t dim, bool tokens_major) {
    if (!tokens_major) return HostTensor(dt, {b, h, n, dim});
    return HostTensor(dt, {b, h, n, dim}, {n * h * dim, dim, h * dim, 1});
}

inline OnDevice make_problem(const Example& ex, const Dims& d, uint64_t seed) {
    const auto& s = ex.spec;
    const bool tm = ex.tokens_major;
    OnDevice p;
    p.in.q = bhnd_tensor(s.dtype(), d.batch, d.q_heads, d.q_len, s.head_dim_qk(), tm);
    // With a latent projection K and V are the latent tensors, head dim L (kv_heads 1).
    p.in.k = bhnd_tensor(s.dtype(), d.batch, d.kv_heads, d.kv_len, s.has_latent() ? s.latent_dim() : s.head_dim_qk(), tm);
    p.in.v = bhnd_tensor(s.dtype(), d.batch, d.kv_heads, d.kv_len, s.has_latent() ? s.latent_dim() : s.head_dim_v(), tm);
    reference::fill_normal(p.in.q, seed + 1);
    reference::fill_normal(p.in.k, seed + 2);
    reference::fill_normal(p.in.v, seed + 3);
    ex.add_inputs(p.in, d, seed + 4);
    p.o = bhnd_tensor(s.dtype(), d.batch, d.q_heads, d.q_len, s.head_dim_v(), tm);
    reference::fill_poison(p.o);  // NaN with a recognisable payload: "never written"
    if (s.returns_lse()) {
        p.lse = HostTensor(DType::f32, {d.batch, d.q_heads, d.q_len});
        reference::fill_poison(p.lse);
    }
    p.q = runtime::to_device(p.in.q);
    p.k = runtime::to_device(p.in.k);
    p.v = runtime::to_device(p.in.v);
    p.d_o = runtime::to_device(p.o);
    if (s.returns_lse()) p.d_lse = runtime::to_device(p.lse);
    for (const auto& [name, t] : p.in.tensors) p.tensors.emplace(name, runtime::to_device(t));
    return p;
}

// Fraction of (b, i, j) the mask keeps (head 0; the examples' masks ignore the head),
// from a sample of rows, for counting only the FLOPs that are done. A score convolution
// and a causal reciprocal band are causal by definition (j <= i besides the mask).
inline double kept_fraction(const dsl::AttentionSpec& spec, const reference::ForwardInputs& in, const Dims& d) {
    const bool causal = spec.has_score_conv() || (spec.has_reciprocal_band() && spec.reciprocal_band_causal());
    if (!spec.mask().defined()) {
        if (!causal || d.q_len == 0 || d.kv_len == 0) return 1.0;
        const double m = static_cast<double>(std::min(d.q_len, d.kv_len));  // rows i < Nk keep i + 1 keys
        return (m * (m + 1) / 2 + static_cast<double>(d.q_len - m) * d.kv_len) / (double(d.q_len) * d.kv_len);
    }
    dsl::Env env;
    env.q_len = d.q_len;
    env.kv_len = d.kv_len;
    env.scalars = in.scalars;
    env.load = [&](const std::string& name, const long long* index, int rank) {
        std::vector<int64_t> idx(index, index + rank);
        return in.tensors.at(name).get(idx.data());
    };
    const int64_t row_step = std::max<int64_t>(1, d.batch * d.q_len * d.kv_len / 4'000'000);
    double kept = 0, total = 0;
    for (int64_t b = 0; b < d.batch; ++b)
        for (int64_t i = 0; i < d.q_len; i += row_step) {
            env.b = b;
            env.q_idx = i;
            for (int64_t j = 0; j < d.kv_len; ++j) {
                env.kv_idx = j;
                kept += (!causal || j <= i) && dsl::interpret_bool(spec.mask(), env);
                total += 1;
            }
        }
    return total > 0 ? kept / total : 1.0;
}

inline void print_dims(const Dims& d) {
    std::printf("B=%lld Hq=%lld Hkv=%lld Nq=%lld Nk=%lld", (long long)d.batch, (long long)d.q_heads,
                (long long)d.kv_heads, (long long)d.q_len, (long long)d.kv_len);
}

}  // namespace detail

// A latent projection's weights (spec.latent(L, "w_qlat", "w_vup")) for d.q_heads heads:
// N(0, 1 / fan-in), so Q_lat and O keep unit scale.
inline void add_latent_weights(const dsl::AttentionSpec& spec, reference::ForwardInputs& in, const Dims& d,
                               uint64_t seed) {
    const int64_t dqk = spec.head_dim_qk(), l = spec.latent_dim(), dv = spec.head_dim_v();
    HostTensor wq(spec.dtype(), {d.q_heads, dqk, l}), wv(spec.dtype(), {d.q_heads, l, dv});
    reference::fill_normal(wq, seed, 0.0, 1.0 / std::sqrt(double(dqk)));
    reference::fill_normal(wv, seed + 1, 0.0, 1.0 / std::sqrt(double(l)));
    in.tensors.emplace(spec.latent_w_qlat(), std::move(wq));
    in.tensors.emplace(spec.latent_w_vup(), std::move(wv));
}

inline int run(const Example& ex) try {
    std::cout << ex.title << "\n" << ex.spec << "\n";
    if (auto why = runtime::why_no_gpu()) {
        if (auto no_nvrtc = runtime::why_no_libnvrtc()) {
            std::cout << "skipped: no usable GPU (" << *why << ") and no NVRTC to compile with ("
                      << *no_nvrtc << ")\n";
            return 77;  // CTest's SKIP_RETURN_CODE
        }
        CompileOptions options;
        options.arch = "sm_90a";
        Attention attn(ex.spec, options);
        std::cout << "compiled only: kernel '" << attn.source().name << "' for " << attn.arch() << " in "
                  << attn.compile_seconds() << " s (0 = from a cache)\n"
                  << "nothing ran: no usable GPU (" << *why << ")\n";
        return 0;
    }
    std::cout << runtime::current_device() << "\n";
    Attention attn(ex.spec);
    std::cout << "kernel '" << attn.source().name << "' for " << attn.arch() << ", compiled in "
              << attn.compile_seconds() << " s (0 = from a cache)\n";

    // Correctness: a small problem against the fp64 reference.
    auto small = detail::make_problem(ex, ex.check, 1234);
    attn(small.args());
    runtime::synchronize("the checked launch");
    runtime::from_device(small.d_o, small.o);
    if (ex.spec.returns_lse()) runtime::from_device(small.d_lse, small.lse);
    auto ref = reference::forward(ex.spec, small.in);
    const auto tol = reference::output_tolerance(ex.spec.dtype());
    auto cmp = reference::compare(small.o, ref.o, tol);
    bool ok = cmp.ok;
    std::cout << "check  ";
    detail::print_dims(ex.check);
    std::printf(": O max abs error %.3g, max rel error %.3g (tolerance %.0e + %.0e * |ref|)", cmp.max_abs_error,
                cmp.max_rel_error, tol.atol, tol.rtol);
    if (ex.spec.returns_lse()) {
        auto lcmp = reference::compare(small.lse, ref.lse, reference::kLseTolerance);
        std::printf(", LSE max abs error %.3g", lcmp.max_abs_error);
        if (!lcmp.ok) cmp.report += "LSE: " + lcmp.report;
        ok = ok && lcmp.ok;
    }
    std::cout << (ok ? "  OK\n" : "  FAILED\n");
    if (!ok) std::cout << cmp.report;

    // Speed: a large problem, warm-up, then synchronised host timing.
    auto big = detail::make_problem(ex, ex.timed, 99);
    const LaunchArgs args = big.args();
    for (int w = 0; w < ex.warmup; ++w) attn(args);
    runtime::synchronize("the warm-up launches");
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < ex.iterations; ++it) attn(args);
    runtime::synchronize("the timed launches");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / ex.iterations;
    const auto& d = ex.timed;
    const double kept = detail::kept_fraction(ex.spec, big.in, d);
    // A latent projection: attention at width L, plus the per-head projections of Q and O.
    const auto& s = ex.spec;
    const double dk = s.has_latent() ? s.latent_dim() : s.head_dim_qk(), dv = s.has_latent() ? s.latent_dim() : s.head_dim_v();
    const double flops = 2.0 * d.batch * d.q_heads * d.q_len * d.kv_len * (dk + dv) * kept +
                         (s.has_latent() ? 2.0 * d.batch * d.q_heads * d.q_len * s.latent_dim() *
                                               (s.head_dim_qk() + s.head_dim_v())
                                         : 0.0);
    std::cout << "timing ";
    detail::print_dims(d);
    std::printf(": %.3f ms per call (mean of %d after %d warm-up), %.1f TFLOP/s counting the %.1f%% of (i, j) "
                "pairs the mask keeps\n",
                seconds * 1e3, ex.iterations, ex.warmup, flops / seconds * 1e-12, kept * 100);
    return ok ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
}

}  // namespace attnjit::examples
