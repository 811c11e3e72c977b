// Launches through the C API on a GPU, checked against the fp64 reference: captured
// tensors and runtime scalars passed positionally and by name, bad arguments refused with
// the output left untouched, and the host time a launch costs. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "api/attention_backward.h"
#include "tests/capi/capi_test_util.h"
#include "tests/gpu/gpu_test_support.h"

namespace attnjit::capitest {
namespace {

using gputest::Case;
using gputest::Check;
using gputest::Mod;
using gputest::Problem;

// The C form of a Problem's arguments; the arrays live in this object.
struct CArgs {
    attnjit_tensor lse = ATTNJIT_TENSOR_INIT;
    std::vector<std::string> tensor_names, scalar_names;
    std::vector<const char*> tensor_name_ptrs, scalar_name_ptrs;
    std::vector<attnjit_tensor> tensors;
    std::vector<double> scalars;
    attnjit_launch_args args = ATTNJIT_LAUNCH_ARGS_INIT;

    // named: pass names (in reverse sorted order, to prove order does not matter);
    // otherwise positional, in the order the C API lists.
    CArgs(const Problem& p, const attnjit_spec* spec, bool named) {
        const LaunchArgs a = p.args();
        args.q = c_tensor(a.q);
        args.k = c_tensor(a.k);
        args.v = c_tensor(a.v);
        args.o = c_tensor(a.o);
        if (a.lse) {
            lse = c_tensor(*a.lse);
            args.lse = &lse;
        }
        for (int32_t i = 0; i < attnjit_spec_num_tensors(spec); ++i) {
            const char* name = nullptr;
            int32_t dtype = 0, rank = 0;
            EXPECT_EQ(attnjit_spec_tensor(spec, i, &name, &dtype, &rank), ATTNJIT_OK);
            tensor_names.push_back(name);
            tensors.push_back(c_tensor(a.tensors.at(name)));
        }
        for (int32_t i = 0; i < attnjit_spec_num_scalars(spec); ++i) {
            const char* name = nullptr;
            int32_t is_int = 0;
            EXPECT_EQ(attnjit_spec_scalar(spec, i, &name, &is_int), ATTNJIT_OK);
            scalar_names.push_back(name);
            scalars.push_back(a.scalars.at(name));
        }
        if (named) {
            std::reverse(tensor_names.begin(), tensor_names.end());
            std::reverse(tensors.begin(), tensors.end());
            std::reverse(scalar_names.begin(), scalar_names.end());
            std::reverse(scalars.begin(), scalars.end());
            for (const auto& n : tensor_names) tensor_name_ptrs.push_back(n.c_str());
            for (const auto& n : scalar_names) scalar_name_ptrs.push_back(n.c_str());
            args.tensor_names = tensor_name_ptrs.data();
            args.scalar_names = scalar_name_ptrs.data();
        }
        args.num_tensors = static_cast<int32_t>(tensors.size());
        args.tensors = tensors.data();
        args.num_scalars = static_cast<int32_t>(scalars.size());
        args.scalars = scalars.data();
    }
    CArgs(const CArgs&) = delete;
};

KernelPtr compile_here(const attnjit_spec* spec) {
    attnjit_kernel* k = nullptr;
    EXPECT_EQ(attnjit_compile(spec, nullptr, &k), ATTNJIT_OK) << attnjit_last_error();
    return KernelPtr(k);
}

Check compare_with_reference(Problem& p) {
    p.download_outputs();
    const auto ref = reference::forward(p.spec, p.in);
    Check r = gputest::check_output(p.c.name() + " O", p.o, ref.o, reference::output_tolerance(p.c.dtype));
    if (r.ok && p.c.lse) r = gputest::check_output(p.c.name() + " LSE", p.lse, ref.lse, reference::kLseTolerance);
    return r;
}

void expect_matches_reference_both_ways(Mod mod) {
    Problem p = gputest::make_problem(gputest::small_case(mod));
    SpecPtr spec = c_spec(p.spec);
    ASSERT_TRUE(spec);
    KernelPtr k = compile_here(spec.get());
    ASSERT_TRUE(k);
    ASSERT_EQ(attnjit_kernel_can_launch(k.get()), 1);
    for (bool named : {false, true}) {
        SCOPED_TRACE(named ? "named arguments" : "positional arguments");
        CArgs c(p, spec.get(), named);
        p.poison_outputs();
        ASSERT_EQ(attnjit_launch(k.get(), &c.args, nullptr), ATTNJIT_OK) << attnjit_last_error();
        const Check r = compare_with_reference(p);
        EXPECT_TRUE(r.ok) << r.message;
    }
}

TEST(CapiLaunch, CapturedTensorsAndScalarsMatchTheReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    // rel_table, q_doc, kv_doc and the scalar cap: three tensors and a scalar.
    expect_matches_reference_both_ways(Mod::Combination);
}

TEST(CapiLaunch, BroadcastBiasMatchesTheReference) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    expect_matches_reference_both_ways(Mod::BiasBroadcast);  // a 4-D bias with batch stride 0
}

TEST(CapiLaunch, BadArgumentsLeaveThePoisonedOutputUntouched) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Problem p = gputest::make_problem(gputest::small_case(Mod::Combination));
    SpecPtr spec = c_spec(p.spec);
    ASSERT_TRUE(spec);
    KernelPtr k = compile_here(spec.get());
    ASSERT_TRUE(k);

    struct Bad {
        const char* what;
        void (*spoil)(attnjit_launch_args&);
        const char* message;
    };
    const Bad cases[] = {
        {"k of the wrong head dim", [](attnjit_launch_args& a) { a.k.shape[3] = 64; }, "'k'"},
        {"o of the wrong length", [](attnjit_launch_args& a) { a.o.shape[2] -= 1; }, "'o'"},
        {"missing scalar", [](attnjit_launch_args& a) { a.num_scalars = 0; }, "args->num_scalars is 0"},
        {"bad dtype code", [](attnjit_launch_args& a) { a.v.dtype = 17; }, "args->v.dtype is 17"},
    };
    for (const Bad& b : cases) {
        SCOPED_TRACE(b.what);
        CArgs c(p, spec.get(), false);
        b.spoil(c.args);
        p.poison_outputs();
        EXPECT_STATUS(attnjit_launch(k.get(), &c.args, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                      {"attnjit_launch: ", b.message});
        p.download_outputs();
        EXPECT_TRUE(gputest::all_poison(p.o)) << "a refused launch wrote O";
        if (p.c.lse) {
            EXPECT_TRUE(gputest::all_poison(p.lse)) << "a refused launch wrote LSE";
        }
    }
}

TEST(CapiLaunch, HostTimePerLaunchIsSmall) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Case c = gputest::small_case(Mod::Combination);
    c.batch = 1;
    c.nq = c.nk = 128;
    Problem p = gputest::make_problem(c);
    SpecPtr spec = c_spec(p.spec);
    ASSERT_TRUE(spec);
    KernelPtr k = compile_here(spec.get());
    ASSERT_TRUE(k);
    CArgs named(p, spec.get(), true);
    Attention direct(p.spec);
    const LaunchArgs cpp_args = p.args();

    constexpr int kLaunches = 2000;
    auto time_per_launch = [&](auto&& launch) {
        for (int i = 0; i < 50; ++i) launch();  // warm: scratch bound, module loaded
        runtime::synchronize("before timing");
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kLaunches; ++i) launch();
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kLaunches;
        runtime::synchronize("after timing");
        return us;
    };
    const double c_us = time_per_launch([&] { ASSERT_EQ(attnjit_launch(k.get(), &named.args, nullptr), ATTNJIT_OK); });
    const double cpp_us = time_per_launch([&] { direct(cpp_args); });
    std::cout << "host time per launch: attnjit_launch (named) " << c_us << " us, Attention::operator() "
              << cpp_us << " us, difference " << (c_us - cpp_us) << " us\n";
    // Loose: launches queue asynchronously, so this is host time; the C layer should add
    // a few microseconds at most on top of the C++ call.
    EXPECT_LT(c_us - cpp_us, 10.0);
}

// The backward through the C API writes the same bits as AttentionBackward (both are
// deterministic; the C++ one is checked against the fp64 reference in the GPU tests).
TEST(CapiBackward, SameBitsAsTheCppBackward) {
    ATTNJIT_SKIP_WITHOUT_GPU();
    Problem p = gputest::make_problem(gputest::small_case(Mod::Combination));
    SpecPtr spec = c_spec(p.spec);
    ASSERT_TRUE(spec);
    Attention forward(p.spec);
    forward(p.args());
    reference::HostTensor d_o(p.o.dtype(), p.o.shape());
    reference::fill_normal(d_o, 31);
    const runtime::DeviceTensor dev_d_o = runtime::to_device(d_o);
    struct Out {
        reference::HostTensor dq, dk, dv;
        runtime::DeviceTensor dev_dq, dev_dk, dev_dv;
    };
    auto make_out = [&] {
        Out o{reference::HostTensor(p.in.q.dtype(), p.in.q.shape()), reference::HostTensor(p.in.k.dtype(), p.in.k.shape()),
              reference::HostTensor(p.in.v.dtype(), p.in.v.shape()), {}, {}, {}};
        for (auto* t : {&o.dq, &o.dk, &o.dv}) reference::fill_poison(*t);
        o.dev_dq = runtime::to_device(o.dq);
        o.dev_dk = runtime::to_device(o.dk);
        o.dev_dv = runtime::to_device(o.dv);
        return o;
    };
    Out cpp = make_out(), c = make_out();

    AttentionBackward backward(p.spec);
    backward(p.args(), GradArgs{dev_d_o.view, cpp.dev_dq.view, cpp.dev_dk.view, cpp.dev_dv.view});

    attnjit_backward* b = nullptr;
    ASSERT_EQ(attnjit_compile_backward(spec.get(), nullptr, &b), ATTNJIT_OK) << attnjit_last_error();
    std::unique_ptr<attnjit_backward, decltype(&attnjit_backward_destroy)> owned(b, &attnjit_backward_destroy);
    ASSERT_EQ(attnjit_backward_can_launch(b), 1);
    CArgs args(p, spec.get(), true);
    attnjit_grad_args grads = ATTNJIT_GRAD_ARGS_INIT;
    grads.d_o = c_tensor(dev_d_o.view);
    grads.dq = c_tensor(c.dev_dq.view);
    grads.dk = c_tensor(c.dev_dk.view);
    grads.dv = c_tensor(c.dev_dv.view);
    ASSERT_EQ(attnjit_launch_backward(b, &args.args, &grads, nullptr), ATTNJIT_OK) << attnjit_last_error();

    runtime::synchronize("the two backward launches");
    for (Out* o : {&cpp, &c}) {
        runtime::from_device(o->dev_dq, o->dq);
        runtime::from_device(o->dev_dk, o->dk);
        runtime::from_device(o->dev_dv, o->dv);
        EXPECT_FALSE(gputest::all_poison(o->dq) || gputest::all_poison(o->dk) || gputest::all_poison(o->dv));
    }
    EXPECT_TRUE(cpp.dq.storage() == c.dq.storage());
    EXPECT_TRUE(cpp.dk.storage() == c.dk.storage());
    EXPECT_TRUE(cpp.dv.storage() == c.dv.storage());
}

}  // namespace
}  // namespace attnjit::capitest
