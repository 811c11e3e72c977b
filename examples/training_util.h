// What a training example does after building its spec (example_util.h's run, for forward +
// backward):
//
//  - with a GPU: on a small problem, the forward then the backward (dO random; dQ, dK, dV
//    and the gradients of the named captured tensors poisoned first), each gradient
//    compared with the fp64 backward reference; then forward + backward of a large
//    problem timed (warm-up, then synchronised host timing);
//  - without one: compile the forward's and the backward's kernels for sm_90a only.
//
// Exit status as example_util.h's run.
#pragma once

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "api/attention_backward.h"
#include "examples/example_util.h"
#include "reference/attention_backward.h"
#include "reference/tolerance.h"

namespace attnjit::examples {

// Captured tensors whose gradients the example trains: name -> whether each element is a
// sum over many score elements (a kernel, a broadcast bias: summed_gradient_tolerance) or
// not (a gate: gradient_tolerance).
using TensorGrads = std::map<std::string, bool>;

namespace detail {

struct DeviceGrads {
    HostTensor d_o, dq, dk, dv;
    std::map<std::string, HostTensor> tensors;
    runtime::DeviceTensor dev_d_o, dev_dq, dev_dk, dev_dv;
    std::map<std::string, runtime::DeviceTensor> dev_tensors;

    GradArgs args() const {
        GradArgs g{dev_d_o.view, dev_dq.view, dev_dk.view, dev_dv.view};
        for (const auto& [name, t] : dev_tensors) g.grads[name] = t.view;
        return g;
    }
    void download() {
        for (auto [host, device] : {std::pair{&dq, &dev_dq}, {&dk, &dev_dk}, {&dv, &dev_dv}})
            runtime::from_device(*device, *host);
        for (auto& [name, t] : tensors) runtime::from_device(dev_tensors.at(name), t);
    }
};

inline HostTensor like(const HostTensor& t) { return HostTensor(t.dtype(), t.shape(), t.strides()); }

// dO random, every gradient poisoned ("never written" shows), in the inputs' layouts.
inline DeviceGrads make_grads(const OnDevice& p, const TensorGrads& wanted, uint64_t seed) {
    DeviceGrads g{like(p.o), like(p.in.q), like(p.in.k), like(p.in.v), {}, {}, {}, {}, {}, {}};
    reference::fill_normal(g.d_o, seed);
    for (HostTensor* t : {&g.dq, &g.dk, &g.dv}) reference::fill_poison(*t);
    for (const auto& [name, summed] : wanted) {
        HostTensor t = like(p.in.tensors.at(name));
        reference::fill_poison(t);
        g.tensors.emplace(name, std::move(t));
    }
    g.dev_d_o = runtime::to_device(g.d_o);
    g.dev_dq = runtime::to_device(g.dq);
    g.dev_dk = runtime::to_device(g.dk);
    g.dev_dv = runtime::to_device(g.dv);
    for (const auto& [name, t] : g.tensors) g.dev_tensors.emplace(name, runtime::to_device(t));
    return g;
}

inline bool check_gradient(const std::string& name, const HostTensor& actual, const reference::DoubleTensor& expected,
                           double t) {
    double g_max = 0;
    for (double x : expected.data) g_max = std::max(g_max, std::fabs(x));
    const auto cmp = reference::compare(actual, expected, reference::Tolerance{t * std::max(g_max, 1e-6), t});
    std::printf(" %s %.2g", name.c_str(), cmp.max_abs_error / std::max(g_max, 1e-30));
    if (!cmp.ok) std::cout << "\n" << name << ": " << cmp.report;
    return cmp.ok;
}

}  // namespace detail

inline int run_training(const Example& ex, const TensorGrads& wanted = {}) try {
    std::cout << ex.title << "\n" << ex.spec << "\n";
    CompileOptions options;
    for (const auto& [name, summed] : wanted) options.grads.insert(name);
    if (auto why = runtime::why_no_gpu()) {
        if (auto no_nvrtc = runtime::why_no_libnvrtc()) {
            std::cout << "skipped: no usable GPU (" << *why << ") and no NVRTC (" << *no_nvrtc << ")\n";
            return 77;
        }
        options.arch = "sm_90a";
        Attention forward(ex.spec, options);
        AttentionBackward backward(ex.spec, options);
        std::cout << "compiled only: '" << forward.source().name << "'";
        for (KernelKind kind : backward.kernel_kinds()) std::cout << ", '" << backward.source(kind).name << "'";
        std::cout << " for sm_90a in " << forward.compile_seconds() + backward.compile_seconds()
                  << " s (0 = from a cache)\nnothing ran: no usable GPU (" << *why << ")\n";
        return 0;
    }
    std::cout << runtime::current_device() << "\n";
    Attention forward(ex.spec);
    AttentionBackward backward(ex.spec, options);

    // Correctness: a small problem's gradients against the fp64 backward reference.
    auto small = detail::make_problem(ex, ex.check, 1234);
    detail::DeviceGrads g = detail::make_grads(small, wanted, 77);
    forward(small.args());
    backward(small.args(), g.args());
    runtime::synchronize("the checked forward and backward");
    g.download();
    std::set<std::string> names;
    for (const auto& [name, summed] : wanted) names.insert(name);
    const auto ref = reference::backward(ex.spec, small.in, g.d_o, names);
    const DType dt = ex.spec.dtype();
    std::cout << "check  ";
    detail::print_dims(ex.check);
    std::cout << ": max error / largest gradient:";
    const double t = reference::gradient_tolerance(dt);
    bool ok = detail::check_gradient("dQ", g.dq, ref.dq, t);
    ok = detail::check_gradient("dK", g.dk, ref.dk, t) && ok;
    ok = detail::check_gradient("dV", g.dv, ref.dv, t) && ok;
    for (const auto& [name, summed] : wanted)
        ok = detail::check_gradient("d" + name, g.tensors.at(name), ref.dtensors.at(name),
                                    summed ? reference::summed_gradient_tolerance(dt) : t) &&
             ok;
    std::printf(" (tolerances %.2g, summed %.2g)%s\n", t, reference::summed_gradient_tolerance(dt),
                ok ? "  OK" : "  FAILED");

    // Speed: forward + backward of a large problem.
    auto big = detail::make_problem(ex, ex.timed, 99);
    detail::DeviceGrads gb = detail::make_grads(big, wanted, 5);
    const LaunchArgs args = big.args();
    const GradArgs grads = gb.args();
    auto step = [&] {
        forward(args);
        backward(args, grads);
    };
    for (int w = 0; w < 3; ++w) step();
    runtime::synchronize("the warm-up steps");
    const int iterations = 10;
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iterations; ++it) step();
    runtime::synchronize("the timed steps");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iterations;
    const auto& d = ex.timed;
    const double kept = detail::kept_fraction(ex.spec, big.in, d);
    // Forward: Q K^T and P V; backward (FlashAttention-2's count): Q K^T, dO V^T, dV, dK, dQ.
    const double dqk = ex.spec.head_dim_qk(), dv = ex.spec.head_dim_v();
    const double flops = 2.0 * d.batch * d.q_heads * d.q_len * d.kv_len * (4 * dqk + 3 * dv) * kept;
    std::cout << "timing ";
    detail::print_dims(d);
    std::printf(": forward + backward %.3f ms per step (mean of %d after 3 warm-up), %.1f TFLOP/s over the kept "
                "%.1f%% of (i, j)\n",
                seconds * 1e3, iterations, flops / seconds * 1e-12, kept * 100);
    return ok ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
}

}  // namespace attnjit::examples
