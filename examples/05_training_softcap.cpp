// Training step through a softcapped causal attention: the forward saves LSE, the backward
// gives dQ, dK, dV with d softcap / d s derived from the DSL (codegen/autodiff.h). With a
// GPU: checks the gradients against the fp64 backward reference and times forward +
// backward; without one: compiles the three kernels for sm_90a.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "api/attention_backward.h"
#include "examples/example_util.h"
#include "reference/attention_backward.h"

namespace {

using namespace attnjit;
using reference::HostTensor;

struct Grads {
    HostTensor d_o, dq, dk, dv;
    runtime::DeviceTensor dev_d_o, dev_dq, dev_dk, dev_dv;
    GradArgs args() const { return GradArgs{dev_d_o.view, dev_dq.view, dev_dk.view, dev_dv.view}; }
};

Grads make_grads(const reference::ForwardInputs& in, const HostTensor& o, uint64_t seed) {
    Grads g{HostTensor(o.dtype(), o.shape()), HostTensor(in.q.dtype(), in.q.shape()),
            HostTensor(in.k.dtype(), in.k.shape()), HostTensor(in.v.dtype(), in.v.shape()), {}, {}, {}, {}};
    reference::fill_normal(g.d_o, seed);
    for (HostTensor* t : {&g.dq, &g.dk, &g.dv}) reference::fill_poison(*t);  // "never written"
    g.dev_d_o = runtime::to_device(g.d_o);
    g.dev_dq = runtime::to_device(g.dq);
    g.dev_dk = runtime::to_device(g.dk);
    g.dev_dv = runtime::to_device(g.dv);
    return g;
}

bool check(const char* name, const HostTensor& actual, const reference::DoubleTensor& expected, DType dt) {
    double g_max = 0;
    for (double x : expected.data) g_max = std::max(g_max, std::fabs(x));
    const auto cmp = reference::compare(actual, expected, reference::gradient_tolerance(dt, g_max));
    std::printf(" %s max error / max |%s| %.2g", name, name, cmp.max_abs_error / std::max(g_max, 1e-30));
    if (!cmp.ok) std::cout << "\n" << name << ": " << cmp.report;
    return cmp.ok;
}

}  // namespace

int main() try {
    namespace mods = dsl::mods;
    examples::Example ex;
    ex.title = "05_training_softcap: forward + backward of softcap(30) causal attention, gradients from the DSL";
    ex.spec = dsl::AttentionSpec()
                  .dtype(DType::bf16)
                  .head_dim(64)
                  .score_mod(mods::softcap(dsl::scalar("cap")))
                  .mask(mods::causal())
                  .return_lse();  // the backward reads the forward's LSE
    ex.check = {2, 4, 2, 200, 200};
    ex.timed = {4, 16, 16, 2048, 2048};
    ex.add_inputs = [](reference::ForwardInputs& in, const examples::Dims&, uint64_t) { in.scalars["cap"] = 30.0; };
    std::cout << ex.title << "\n" << ex.spec << "\n";

    if (auto why = runtime::why_no_gpu()) {
        if (auto no_nvrtc = runtime::why_no_libnvrtc()) {
            std::cout << "skipped: no usable GPU (" << *why << ") and no NVRTC (" << *no_nvrtc << ")\n";
            return 77;
        }
        CompileOptions options;
        options.arch = "sm_90a";
        Attention forward(ex.spec, options);
        AttentionBackward backward(ex.spec, options);
        std::cout << "compiled only: '" << forward.source().name << "'";
        for (KernelKind kind : backward.kernel_kinds()) std::cout << ", '" << backward.source(kind).name << "'";
        std::cout << " for sm_90a in " << forward.compile_seconds() + backward.compile_seconds()
                  << " s (0 = from a cache)\n"
                  << "nothing ran: no usable GPU (" << *why << ")\n";
        return 0;
    }
    std::cout << runtime::current_device() << "\n";
    Attention forward(ex.spec);
    AttentionBackward backward(ex.spec);

    // Correctness: a small problem's gradients against the fp64 backward reference.
    auto small = examples::detail::make_problem(ex, ex.check, 1234);
    Grads g = make_grads(small.in, small.o, 77);
    forward(small.args());
    backward(small.args(), g.args());
    runtime::synchronize("the checked forward and backward");
    for (auto [host, device] : {std::pair{&g.dq, &g.dev_dq}, {&g.dk, &g.dev_dk}, {&g.dv, &g.dev_dv}})
        runtime::from_device(*device, *host);
    const auto ref = reference::backward(ex.spec, small.in, g.d_o);
    std::cout << "check  ";
    examples::detail::print_dims(ex.check);
    std::cout << ":";
    const DType dt = ex.spec.dtype();
    bool ok = check("dQ", g.dq, ref.dq, dt);
    ok = check("dK", g.dk, ref.dk, dt) && ok;
    ok = check("dV", g.dv, ref.dv, dt) && ok;
    std::printf(" (tolerance %.2g of the largest)%s\n", reference::gradient_tolerance(dt), ok ? "  OK" : "  FAILED");

    // Speed: forward + backward of a large problem.
    auto big = examples::detail::make_problem(ex, ex.timed, 99);
    Grads gb = make_grads(big.in, big.o, 5);
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
    const double kept = examples::detail::kept_fraction(ex.spec, big.in, d);
    // Forward 2 products of N x N x D, backward 5 (FlashAttention-2's count).
    const double flops = 7.0 * 2.0 * d.batch * d.q_heads * d.q_len * d.kv_len * 64 * kept;
    std::cout << "timing ";
    examples::detail::print_dims(d);
    std::printf(": forward + backward %.3f ms per step (mean of %d after 3 warm-up), %.1f TFLOP/s over the kept "
                "%.1f%% of (i, j)\n",
                seconds * 1e3, iterations, flops / seconds * 1e-12, kept * 100);
    return ok ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
}
