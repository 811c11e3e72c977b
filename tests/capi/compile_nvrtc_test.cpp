// attnjit_compile for an explicit architecture (NVRTC, no GPU needed), and what a launch
// of such a compile-only kernel says: every argument check first (the same errors as on a
// GPU), then why it cannot launch. Skips when libnvrtc cannot be loaded.
#include <gtest/gtest.h>

#include <cstddef>

#include <string>
#include <vector>

#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "tests/capi/capi_test_util.h"
#include "tests/capi/fake_launch_args.h"
#include "tests/capi/test_specs.h"

namespace attnjit::capitest {
namespace {

#define SKIP_WITHOUT_NVRTC()                                                              \
    do {                                                                                  \
        if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << "no NVRTC: " << *why; \
    } while (0)

KernelPtr compile_for(const attnjit_spec* spec, const char* arch) {
    attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
    o.arch = arch;
    attnjit_kernel* k = nullptr;
    EXPECT_EQ(attnjit_compile(spec, &o, &k), ATTNJIT_OK) << attnjit_last_error();
    return KernelPtr(k);
}

// A kernel of spec_with_every_input() compiled for sm_80, shared by the launch tests.
const attnjit_kernel* sm80_kernel() {
    static SpecPtr spec = c_spec(spec_with_every_input());
    static KernelPtr kernel = compile_for(spec.get(), "sm_80");
    return kernel.get();
}

TEST(CapiCompile, ExplicitArchCompilesWithoutAGpu) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    for (const char* arch : {"sm_90a", "sm_80"}) {
        SCOPED_TRACE(arch);
        KernelPtr k = compile_for(spec.get(), arch);
        ASSERT_TRUE(k);
        EXPECT_STREQ(attnjit_kernel_arch(k.get()), arch);
        const char* source = attnjit_kernel_source(k.get());
        ASSERT_NE(source, nullptr) << attnjit_last_error();
        EXPECT_NE(std::string(source).find("attnjit_forward"), std::string::npos) << "no entry point in the source";
        EXPECT_GE(attnjit_kernel_compile_seconds(k.get()), 0.0);
        if (runtime::why_no_gpu()) {
            EXPECT_EQ(attnjit_kernel_can_launch(k.get()), 0);
        }
        const attnjit_spec* owned = attnjit_kernel_spec(k.get());
        ASSERT_NE(owned, nullptr);
        EXPECT_EQ(c_json(owned), c_json(spec.get()));
        EXPECT_EQ(attnjit_spec_num_tensors(owned), 2);
    }
}

// The generated source of spec compiled with o ("" when the compile fails: a test failure).
std::string compiled_source(attnjit_spec* spec, const attnjit_compile_options& o) {
    attnjit_kernel* k = nullptr;
    EXPECT_EQ(attnjit_compile(spec, &o, &k), ATTNJIT_OK) << attnjit_last_error();
    KernelPtr owned(k);
    const char* text = k ? attnjit_kernel_source(k) : nullptr;
    return std::string(text ? text : "");
}

// options->mainloop: AUTO gives the sm90 loop on sm_90a, SM80 forces the sm80 one, SM90 where it
// cannot run is the caller's mistake; a struct from before the field (and `autotune`) reads AUTO;
// autotune takes its three values only.
TEST(CapiCompile, MainloopOptionAndTheOlderStruct) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(dsl::AttentionSpec().dtype(DType::bf16).head_dim(128).mask(dsl::mods::causal()));
    ASSERT_TRUE(spec);
    auto source_of = [&](const attnjit_compile_options& o) { return compiled_source(spec.get(), o); };
    attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
    o.arch = "sm_90a";
    EXPECT_NE(source_of(o).find("MainloopKind::sm90"), std::string::npos);
    o.mainloop = ATTNJIT_MAINLOOP_SM80;
    EXPECT_NE(source_of(o).find("MainloopKind::sm80"), std::string::npos);
    o.block_m = 64;  // the other tile fields from the sm80 loop's default tile (128 x 64, 4 warps)
    EXPECT_NE(source_of(o).find("MainloopKind::sm80, attnjit::bf16_t, 128, 128, 64, 64, 4, 2>"), std::string::npos);
    attnjit_compile_options older = o;
    older.struct_size = offsetof(attnjit_compile_options, mainloop) + sizeof(int32_t);  // C pads it to 8
    older.struct_size = (older.struct_size + 7) / 8 * 8;
    older.block_m = 0;
    older.mainloop = 7;  // past the caller's struct: never read
    older.autotune = 9;
    EXPECT_NE(source_of(older).find("MainloopKind::sm90"), std::string::npos);
    attnjit_kernel* raw = nullptr;
    o.block_m = 0;
    o.mainloop = ATTNJIT_MAINLOOP_SM90;
    o.arch = "sm_80";
    EXPECT_STATUS(attnjit_compile(spec.get(), &o, &raw), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"the sm90 main loop runs the forward on sm_90a"});
    o.mainloop = 3;
    EXPECT_STATUS(attnjit_compile(spec.get(), &o, &raw), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"options->mainloop is 3"});
    o.mainloop = ATTNJIT_MAINLOOP_AUTO;
    o.autotune = 3;
    EXPECT_STATUS(attnjit_compile(spec.get(), &o, &raw), ATTNJIT_ERROR_INVALID_ARGUMENT, {"options->autotune is 3"});
    o.autotune = ATTNJIT_AUTOTUNE_ON;  // compile only here: nothing to time, the default kernel
    o.arch = "sm_90a";
    EXPECT_NE(source_of(o).find("MainloopKind::sm90"), std::string::npos);
    EXPECT_EQ(raw, nullptr);
}

// The sm90 forward's rows and warps go together: at head dim 64 (default 192 rows, 16 warps)
// block_m = 128 alone takes 12 warps and warps = 12 alone 128 rows; 128 rows with another warp
// count are an sm80 tile.
TEST(CapiCompile, Sm90RowsAndWarpsGoTogether) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(dsl::AttentionSpec().dtype(DType::bf16).head_dim(64).mask(dsl::mods::causal()));
    ASSERT_TRUE(spec);
    auto source_of = [&](const attnjit_compile_options& o) { return compiled_source(spec.get(), o); };
    attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
    o.arch = "sm_90a";
    EXPECT_NE(source_of(o).find("MainloopKind::sm90, attnjit::bf16_t, 64, 64, 192, 128, 16, 2>"), std::string::npos);
    o.block_m = 128;
    EXPECT_NE(source_of(o).find("MainloopKind::sm90, attnjit::bf16_t, 64, 64, 128, 128, 12, 2>"), std::string::npos);
    o.block_m = 0;
    o.warps = 12;
    EXPECT_NE(source_of(o).find("MainloopKind::sm90, attnjit::bf16_t, 64, 64, 128, 128, 12, 2>"), std::string::npos);
    o.block_m = 128;
    o.warps = 4;
    EXPECT_NE(source_of(o).find("MainloopKind::sm80"), std::string::npos);
}

// Int32 edges that constant folding must leave alone reach NVRTC as valid CUDA (before
// the int32 literal rule, a 64-bit literal made NVRTC reject the source: INTERNAL).
TEST(CapiCompile, Int32EdgesCompile) {
    SKIP_WITHOUT_NVRTC();
    const std::string json = R"({"format":"attnjit.spec/1","dtype":"f16","head_dim":64,)"
                             R"J("mask":"max(q_idx, 2147483647) > kv_idx && q_idx < -2147483648 / -1 + 65536 * 65536 + abs(-2147483648)"})J";
    attnjit_spec* spec = nullptr;
    ASSERT_EQ(attnjit_spec_from_json(json.data(), json.size(), &spec), ATTNJIT_OK) << attnjit_last_error();
    SpecPtr owned(spec);
    EXPECT_TRUE(compile_for(spec, "sm_80"));
}

TEST(CapiCompile, TheKernelOwnsItsSpec) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    const std::string json = c_json(spec.get());
    KernelPtr k = compile_for(spec.get(), "sm_80");
    ASSERT_TRUE(k);
    spec.reset();  // the caller's handle may go first
    EXPECT_EQ(c_json(attnjit_kernel_spec(k.get())), json);
}

TEST(CapiCompile, SecondCompileOfTheSameSpecIsAMemoryHit) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    KernelPtr first = compile_for(spec.get(), "sm_80");
    KernelPtr second = compile_for(spec.get(), "sm_80");
    ASSERT_TRUE(first && second);
    EXPECT_EQ(attnjit_kernel_compile_seconds(second.get()), 0.0);
}

TEST(CapiCompile, AnArchThatIsNoGpuIsTheCallersMistake) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
    o.arch = "banana";
    attnjit_kernel* k = nullptr;
    EXPECT_STATUS(attnjit_compile(spec.get(), &o, &k), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_compile: ", "'banana'", "sm_90a"});
    EXPECT_EQ(k, nullptr);
}

TEST(CapiCompileOnlyLaunch, ValidArgumentsSayWhyItCannotLaunch) {
    SKIP_WITHOUT_NVRTC();
    const attnjit_kernel* k = sm80_kernel();
    ASSERT_NE(k, nullptr);
    FakeLaunch f;
    if (auto why = runtime::why_no_gpu()) {
        EXPECT_STATUS(attnjit_launch(k, &f.args, nullptr), ATTNJIT_ERROR_ENVIRONMENT,
                      {"attnjit_launch", "compiled for sm_80 without a usable GPU", "options->arch NULL"});
    } else if (attnjit_kernel_can_launch(k) == 0) {
        EXPECT_STATUS(attnjit_launch(k, &f.args, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                      {"attnjit_launch", "compiled for sm_80 only"});
    }
}

TEST(CapiCompileOnlyLaunch, NamedArgumentsInAnyOrderAreAccepted) {
    SKIP_WITHOUT_NVRTC();
    const attnjit_kernel* k = sm80_kernel();
    ASSERT_NE(k, nullptr);
    if (attnjit_kernel_can_launch(k)) GTEST_SKIP() << "the sm_80 kernel is loaded here; the GPU tests launch it";
    FakeLaunch f;
    const attnjit_tensor swapped[2] = {f.tensors[1], f.tensors[0]};
    const char* tensor_names[2] = {"slopes", "bias"};
    const double scalars[2] = {8.0, 30.0};
    const char* scalar_names[2] = {"window", "cap"};
    f.args.tensors = swapped;
    f.args.tensor_names = tensor_names;
    f.args.scalars = scalars;
    f.args.scalar_names = scalar_names;
    // Past every argument check: only the missing GPU (or the other arch) is left.
    const attnjit_status s = attnjit_launch(k, &f.args, nullptr);
    EXPECT_TRUE(s == ATTNJIT_ERROR_ENVIRONMENT || std::string(attnjit_last_error()).find("compiled for sm_80 only") !=
                                                      std::string::npos)
        << attnjit_status_name(s) << ": " << attnjit_last_error();

    // The same names in positional order would be wrong: slopes has rank 1, bias rank 4.
    f.args.tensor_names = nullptr;
    EXPECT_STATUS(attnjit_launch(k, &f.args, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT, {"attnjit_launch", "bias"});
}

struct BadLaunch {
    const char* what;
    void (*spoil)(FakeLaunch&);
    std::vector<std::string> message;
};

TEST(CapiCompileOnlyLaunch, EveryBadArgumentIsRefusedWithItsName) {
    SKIP_WITHOUT_NVRTC();
    const attnjit_kernel* k = sm80_kernel();
    ASSERT_NE(k, nullptr);
    static const char* unknown[2] = {"bias", "slope"};
    static const char* twice[2] = {"bias", "bias"};
    static const char* null_name[2] = {"bias", nullptr};
    static const char* scalar_twice[2] = {"cap", "cap"};
    const BadLaunch cases[] = {
        {"struct_size", [](FakeLaunch& f) { f.args.struct_size = 8; },
         {"args->struct_size is 8", "ATTNJIT_LAUNCH_ARGS_INIT"}},
        {"dtype code", [](FakeLaunch& f) { f.args.q.dtype = 9; }, {"args->q.dtype is 9", "attnjit_dtype"}},
        {"negative dtype code", [](FakeLaunch& f) { f.tensors[1].dtype = -1; },
         {"args->tensors[1] ('slopes').dtype is -1"}},
        {"rank above 8", [](FakeLaunch& f) { f.args.k.rank = 9; }, {"args->k.rank is 9", "[0, 8]"}},
        {"negative rank", [](FakeLaunch& f) { f.lse.rank = -1; }, {"args->lse.rank is -1"}},
        {"too few tensors", [](FakeLaunch& f) { f.args.num_tensors = 1; },
         {"args->num_tensors is 1", "reads 2 captured tensors", "'bias', 'slopes'", "positional order"}},
        {"tensor array missing", [](FakeLaunch& f) { f.args.tensors = nullptr; },
         {"args->tensors is null", "num_tensors is 2"}},
        {"unknown tensor name", [](FakeLaunch& f) { f.args.tensor_names = unknown; },
         {"args->tensor_names[1] is 'slope'", "does not read", "'bias', 'slopes'"}},
        {"duplicate tensor name", [](FakeLaunch& f) { f.args.tensor_names = twice; },
         {"args->tensor_names[1] 'bias' is given twice"}},
        {"null tensor name", [](FakeLaunch& f) { f.args.tensor_names = null_name; },
         {"args->tensor_names[1] is null", "positionally"}},
        {"missing scalar", [](FakeLaunch& f) { f.args.num_scalars = 1; },
         {"args->num_scalars is 1", "reads 2 runtime scalars", "'cap', 'window'"}},
        {"extra scalar", [](FakeLaunch& f) { f.args.num_scalars = 3; }, {"args->num_scalars is 3"}},
        {"duplicate scalar name", [](FakeLaunch& f) { f.args.scalar_names = scalar_twice; },
         {"args->scalar_names[1] 'cap' is given twice"}},
        // Past the C layer: attnjit's own launch checks.
        {"wrong head dim", [](FakeLaunch& f) { f.args.k.shape[3] = 64; }, {"'k'"}},
        {"lse missing", [](FakeLaunch& f) { f.args.lse = nullptr; }, {"lse"}},
        {"null data", [](FakeLaunch& f) { f.args.v.data = nullptr; }, {"'v'", "null data pointer"}},
    };
    for (const BadLaunch& c : cases) {
        SCOPED_TRACE(c.what);
        FakeLaunch f;
        c.spoil(f);
        std::vector<std::string> expected{"attnjit_launch: "};
        expected.insert(expected.end(), c.message.begin(), c.message.end());
        const attnjit_status s = attnjit_launch(k, &f.args, nullptr);
        const std::string message = attnjit_last_error();
        EXPECT_EQ(s, ATTNJIT_ERROR_INVALID_ARGUMENT) << attnjit_status_name(s) << ": " << message;
        for (const std::string& part : expected)
            EXPECT_NE(message.find(part), std::string::npos) << "the message lacks \"" << part << "\":\n  " << message;
    }
    EXPECT_STATUS(attnjit_launch(k, nullptr, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_launch", "'args' is null", "ATTNJIT_LAUNCH_ARGS_INIT"});
}

// ---- the backward ------------------------------------------------------------------

using BackwardPtr = std::unique_ptr<attnjit_backward, decltype(&attnjit_backward_destroy)>;

BackwardPtr compile_backward_for(const attnjit_spec* spec, const char* arch) {
    attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
    o.arch = arch;
    attnjit_backward* b = nullptr;
    EXPECT_EQ(attnjit_compile_backward(spec, &o, &b), ATTNJIT_OK) << attnjit_last_error();
    return BackwardPtr(b, &attnjit_backward_destroy);
}

// Fake gradient tensors beside FakeLaunch's arguments (slots 7..10: disjoint from them).
struct FakeGrads {
    attnjit_grad_args grads = ATTNJIT_GRAD_ARGS_INIT;
    FakeGrads() {
        const int64_t qkvo[4] = {FakeLaunch::B, FakeLaunch::H, FakeLaunch::N, FakeLaunch::D};
        grads.d_o = FakeLaunch::tensor(7, ATTNJIT_BF16, 4, qkvo);
        grads.dq = FakeLaunch::tensor(8, ATTNJIT_BF16, 4, qkvo);
        grads.dk = FakeLaunch::tensor(9, ATTNJIT_BF16, 4, qkvo);
        grads.dv = FakeLaunch::tensor(10, ATTNJIT_BF16, 4, qkvo);
    }
};

TEST(CapiBackward, CompilesForAnArchWithoutAGpu) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    BackwardPtr b = compile_backward_for(spec.get(), "sm_90a");
    ASSERT_TRUE(b);
    if (runtime::why_no_gpu()) {
        EXPECT_EQ(attnjit_backward_can_launch(b.get()), 0);
    }
    EXPECT_EQ(attnjit_backward_can_launch(nullptr), 0);
}

// fast_backward = 1 compiles the fast backward; a struct from before the field existed
// (struct_size ending before it) still compiles, as the deterministic one; 2 is refused.
TEST(CapiBackward, FastBackwardOptionAndTheOlderStruct) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
    o.arch = "sm_90a";
    o.fast_backward = 1;
    attnjit_backward* b = nullptr;
    EXPECT_EQ(attnjit_compile_backward(spec.get(), &o, &b), ATTNJIT_OK) << attnjit_last_error();
    attnjit_backward_destroy(b);
    b = nullptr;
    attnjit_compile_options older = ATTNJIT_COMPILE_OPTIONS_INIT;
    older.arch = "sm_90a";
    older.struct_size = offsetof(attnjit_compile_options, fast_backward);
    older.fast_backward = 7;  // past the caller's struct: never read
    EXPECT_EQ(attnjit_compile_backward(spec.get(), &older, &b), ATTNJIT_OK) << attnjit_last_error();
    attnjit_backward_destroy(b);
    b = nullptr;
    o.fast_backward = 2;
    EXPECT_STATUS(attnjit_compile_backward(spec.get(), &o, &b), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"options->fast_backward is 2", "pass 0 (deterministic) or 1"});
    EXPECT_EQ(b, nullptr);
}

// options->mainloop reaches the backward's key-tile kernel: SM80 and SM90 compile for sm_90a,
// SM90 for sm_80 is refused with the loop's reason.
TEST(CapiBackward, MainloopOption) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(dsl::AttentionSpec().dtype(DType::bf16).head_dim(64).return_lse());
    ASSERT_TRUE(spec);
    attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
    o.arch = "sm_90a";
    for (int32_t loop : {ATTNJIT_MAINLOOP_SM80, ATTNJIT_MAINLOOP_SM90}) {
        o.mainloop = loop;
        attnjit_backward* b = nullptr;
        EXPECT_EQ(attnjit_compile_backward(spec.get(), &o, &b), ATTNJIT_OK) << attnjit_last_error();
        attnjit_backward_destroy(b);
    }
    o.arch = "sm_80";
    attnjit_backward* b = nullptr;
    EXPECT_STATUS(attnjit_compile_backward(spec.get(), &o, &b), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"CompileOptions.mainloop = sm90", "the sm90 main loop runs the forward on sm_90a"});
    EXPECT_EQ(b, nullptr);
}

// Attention sinks from C: the spec's "sinks" tensor is a captured tensor of the forward
// (positional order: bias, sinks, slopes), and its gradient is asked for by name among
// input_grad_names / input_grads. A grad_args struct from before those fields existed
// (struct_size ending before them) still works.
TEST(CapiBackward, SinksGradientArguments) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(dsl::AttentionSpec(spec_with_every_input()).sinks("sinks"));
    ASSERT_TRUE(spec);
    EXPECT_EQ(attnjit_spec_num_tensors(spec.get()), 3);
    BackwardPtr b = compile_backward_for(spec.get(), "sm_80");
    ASSERT_TRUE(b);
    if (attnjit_backward_can_launch(b.get())) GTEST_SKIP() << "loaded here; the GPU tests launch it";
    FakeLaunch f;
    const int64_t hq[1] = {FakeLaunch::H};
    attnjit_tensor tensors[3] = {f.tensors[0], FakeLaunch::tensor(11, ATTNJIT_F32, 1, hq), f.tensors[1]};
    f.args.num_tensors = 3;
    f.args.tensors = tensors;
    auto cannot_launch = [&](const attnjit_grad_args& g) {
        const attnjit_status s = attnjit_launch_backward(b.get(), &f.args, &g, nullptr);
        EXPECT_TRUE(s == ATTNJIT_ERROR_ENVIRONMENT ||
                    std::string(attnjit_last_error()).find("another arch") != std::string::npos)
            << attnjit_status_name(s) << ": " << attnjit_last_error();
    };
    // The sinks' gradient goes by name, like a captured tensor's.
    static const char* const kSinks[1] = {"sinks"};
    auto with_d_sinks = [](attnjit_grad_args& ga, const attnjit_tensor* t) {
        ga.input_grad_names = kSinks;
        ga.input_grads = t;
        ga.num_input_grads = 1;
    };
    const attnjit_tensor d_sinks = FakeLaunch::tensor(12, ATTNJIT_F32, 1, hq);
    FakeGrads g;
    with_d_sinks(g.grads, &d_sinks);
    cannot_launch(g.grads);  // every argument passed the checks
    FakeGrads none;          // no entry: no gradient for the sinks
    cannot_launch(none.grads);
    FakeGrads older;
    older.grads.struct_size = offsetof(attnjit_grad_args, input_grad_names);
    older.grads.num_input_grads = 7;  // past the caller's struct: never read
    cannot_launch(older.grads);

    FakeGrads wrong_shape;
    const int64_t three[1] = {3};
    const attnjit_tensor short_sinks = FakeLaunch::tensor(12, ATTNJIT_F32, 1, three);
    with_d_sinks(wrong_shape.grads, &short_sinks);
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &wrong_shape.grads, nullptr),
                  ATTNJIT_ERROR_INVALID_ARGUMENT, {"grads['sinks'] has shape [3]", "[Hq] = [2]"});
    FakeGrads wrong_dtype;
    const attnjit_tensor bf16_sinks = FakeLaunch::tensor(12, ATTNJIT_BF16, 1, hq);
    with_d_sinks(wrong_dtype.grads, &bf16_sinks);
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &wrong_dtype.grads, nullptr),
                  ATTNJIT_ERROR_INVALID_ARGUMENT, {"has dtype bf16", "f32"});
    FakeGrads in_place;
    with_d_sinks(in_place.grads, &tensors[1]);
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &in_place.grads, nullptr),
                  ATTNJIT_ERROR_INVALID_ARGUMENT, {"same memory as captured tensor 'sinks'"});
    tensors[1].shape[0] = 3;  // the forward's sinks must be [Hq] too
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &g.grads, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"the sinks tensor 'sinks' has shape [3]", "one sink logit per query head"});

    // A spec without sinks refuses a gradient named "sinks".
    SpecPtr plain = c_spec(spec_with_every_input());
    BackwardPtr pb = compile_backward_for(plain.get(), "sm_80");
    ASSERT_TRUE(pb);
    FakeLaunch pf;
    EXPECT_STATUS(attnjit_launch_backward(pb.get(), &pf.args, &g.grads, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"GradArgs::grads has 'sinks', which this AttentionBackward was not asked for"});
}

TEST(CapiBackward, ASpecWithoutLseIsRefused) {
    SpecPtr spec = c_spec(dsl::AttentionSpec().dtype(DType::bf16).head_dim(64));
    ASSERT_TRUE(spec);
    attnjit_backward* b = nullptr;
    EXPECT_STATUS(attnjit_compile_backward(spec.get(), nullptr, &b), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_compile_backward: ", "return_lse"});
    EXPECT_EQ(b, nullptr);
    EXPECT_STATUS(attnjit_compile_backward(nullptr, nullptr, &b), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"argument 'spec' is null"});
}

// A compile-only backward checks every argument, then says why it cannot launch.
TEST(CapiBackward, CompileOnlyLaunchChecksArgumentsFirst) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    BackwardPtr b = compile_backward_for(spec.get(), "sm_80");
    ASSERT_TRUE(b);
    if (attnjit_backward_can_launch(b.get())) GTEST_SKIP() << "loaded here; the GPU tests launch it";
    FakeLaunch f;
    FakeGrads g;
    const attnjit_status s = attnjit_launch_backward(b.get(), &f.args, &g.grads, nullptr);
    EXPECT_TRUE(s == ATTNJIT_ERROR_ENVIRONMENT ||
                std::string(attnjit_last_error()).find("another arch") != std::string::npos)
        << attnjit_status_name(s) << ": " << attnjit_last_error();

    FakeGrads wrong;
    wrong.grads.dq.shape[2] = 17;
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &wrong.grads, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_launch_backward: ", "argument 'dq' has shape [1, 2, 17, 128]"});
    FakeGrads in_place;
    in_place.grads.dk = f.args.k;
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &in_place.grads, nullptr),
                  ATTNJIT_ERROR_INVALID_ARGUMENT, {"argument 'dk' is the same memory as 'k'"});
    FakeGrads old;
    old.grads.struct_size -= 8;
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &old.grads, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"grads->struct_size", "ATTNJIT_GRAD_ARGS_INIT"});
    FakeGrads bad_dtype;
    bad_dtype.grads.dv.dtype = 42;
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &bad_dtype.grads, nullptr),
                  ATTNJIT_ERROR_INVALID_ARGUMENT, {"grads->dv.dtype is 42"});
    EXPECT_STATUS(attnjit_launch_backward(nullptr, &f.args, &g.grads, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"argument 'backward' is null"});
}

// Gradients of captured tensors and scalars: grad_names at compile time (a struct that ends
// before them, from an older caller, compiles without), and the outputs at launch (checked
// before the compile-only backward says it cannot launch; a grads struct from before
// input_grads is accepted).
TEST(CapiBackward, InputGradientsAndTheOlderStructs) {
    SKIP_WITHOUT_NVRTC();
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    const char* names[] = {"bias", "slopes", "cap"};
    attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
    o.arch = "sm_80";
    o.grad_names = names;
    o.num_grads = 3;
    attnjit_backward* raw = nullptr;
    ASSERT_EQ(attnjit_compile_backward(spec.get(), &o, &raw), ATTNJIT_OK) << attnjit_last_error();
    BackwardPtr b(raw, &attnjit_backward_destroy);
    attnjit_compile_options older = o;
    older.struct_size = offsetof(attnjit_compile_options, grad_names);
    older.num_grads = -5;  // past the caller's struct: never read
    raw = nullptr;
    EXPECT_EQ(attnjit_compile_backward(spec.get(), &older, &raw), ATTNJIT_OK) << attnjit_last_error();
    attnjit_backward_destroy(raw);
    const char* twice[] = {"bias", "bias"};
    attnjit_compile_options dup = o;
    dup.grad_names = twice;
    dup.num_grads = 2;
    raw = nullptr;
    EXPECT_STATUS(attnjit_compile_backward(spec.get(), &dup, &raw), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"options->grad_names names 'bias' twice"});
    const char* window[] = {"window"};
    dup.grad_names = window;
    dup.num_grads = 1;
    EXPECT_STATUS(attnjit_compile_backward(spec.get(), &dup, &raw), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"scalar 'window', an int scalar"});
    EXPECT_EQ(raw, nullptr);

    if (attnjit_backward_can_launch(b.get())) GTEST_SKIP() << "loaded here; the GPU tests launch it";
    FakeLaunch f;
    FakeGrads g;  // no input gradients
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &g.grads, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"the gradient of scalar 'cap' is missing"});
    const int64_t bias_shape[4] = {FakeLaunch::B, FakeLaunch::H, FakeLaunch::N, FakeLaunch::N},
                  slopes_shape[1] = {FakeLaunch::H};
    attnjit_tensor outs[3] = {FakeLaunch::tensor(11, ATTNJIT_BF16, 4, bias_shape),
                              FakeLaunch::tensor(12, ATTNJIT_F32, 1, slopes_shape),
                              FakeLaunch::tensor(13, ATTNJIT_F32, 0, nullptr)};
    g.grads.input_grad_names = names;
    g.grads.input_grads = outs;
    g.grads.num_input_grads = 3;
    const attnjit_status s = attnjit_launch_backward(b.get(), &f.args, &g.grads, nullptr);
    EXPECT_TRUE(s == ATTNJIT_ERROR_ENVIRONMENT || std::string(attnjit_last_error()).find("another arch") != std::string::npos)
        << attnjit_status_name(s) << ": " << attnjit_last_error();
    outs[1].dtype = ATTNJIT_BF16;
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &g.grads, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"GradArgs::grads[\"slopes\"] has dtype bf16"});
    // An older caller's grads struct (no input gradients) reaches the same check.
    FakeGrads old;
    old.grads.struct_size = offsetof(attnjit_grad_args, input_grad_names);
    EXPECT_STATUS(attnjit_launch_backward(b.get(), &f.args, &old.grads, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"the gradient of scalar 'cap' is missing"});
}

}  // namespace
}  // namespace attnjit::capitest
