// The Variant contract of the device templates (templates/attnjit/common/variant.cuh),
// checked by NVRTC: a generated Variant extended with a structural hook compiles where the
// main loop supports it, and is refused with check_variant's English message where it
// does not. Needs libnvrtc, never a GPU.
#include <gtest/gtest.h>

#include <string>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "dsl/example_specs.h"
#include "runtime/compile_failure.h"
#include "runtime/compiler.h"
#include "runtime/cuda_api.h"

namespace attnjit::codegen {
namespace {

// The generated source of `example` with `members` added at the end of its Variant.
KernelSource with_variant_members(const std::string& example, DType dtype, const std::string& members) {
    const std::string arch = "sm_80";
    const auto spec = dsl::example_spec(example, dtype, 64);
    KernelSource k = generate(spec, make_config(spec, KernelKind::forward, arch), arch);
    const std::string opener = "struct Variant : attnjit::VariantDefaults {\n";
    const size_t at = k.source.find(opener);
    EXPECT_NE(at, std::string::npos) << "the generated Variant no longer derives from VariantDefaults";
    const size_t end = at == std::string::npos ? at : k.source.find("\n};\n", at);  // the Variant's close
    EXPECT_NE(end, std::string::npos);
    if (end != std::string::npos) k.source.insert(end + 1, members);
    k.name += "_contract";
    return k;
}

// The NVRTC log of compiling `k`, or "" when it compiles.
std::string compile_log(const KernelSource& k) {
    try {
        runtime::compile_kernel(k, k.arch);
        return "";
    } catch (const runtime::CompileFailure& e) {
        return e.log().empty() ? "(no log)" : e.log();
    }
}

const char* const kOutputTransform = R"(
    static constexpr bool kHasOutputTransform = true;
    __device__ static float transform_output(const Params& p, const Head& hd, const Row& r, float o, int q, int d) {
        return o * (1.0f + 0.5f * (d & 1));
    }
)";

TEST(VariantContract, OutputTransformCompilesOnBothMainLoops) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    for (DType d : {DType::bf16, DType::f32})  // sm80 and simt main loops
        EXPECT_EQ(compile_log(with_variant_members("causal", d, kOutputTransform)), "") << dtype_name(d);
}

TEST(VariantContract, OutputTransformWithoutItsHookIsRefused) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    const std::string log =
        compile_log(with_variant_members("causal", DType::bf16, "    static constexpr bool kHasOutputTransform = true;\n"));
    EXPECT_NE(log.find("kHasOutputTransform requires "), std::string::npos) << log;
    EXPECT_NE(log.find("static float transform_output(const Params&, const Head&, const Row&"), std::string::npos)
        << log;
}

TEST(VariantContract, UnsupportedStructuralHooksAreRefusedByName) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::string log = compile_log(
        with_variant_members("plain", DType::bf16, "    static constexpr bool kHasScoreTileTransform = true;\n"));
    EXPECT_NE(log.find("kHasScoreTileTransform (whole-score-tile transform"), std::string::npos) << log;
}

TEST(VariantContract, BiasTileWithoutItsHooksIsRefused) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    const std::string log =
        compile_log(with_variant_members("plain", DType::f32, "    static constexpr bool kHasBiasTile = true;\n"));
    EXPECT_NE(log.find("kHasBiasTile requires kHasScoreMod"), std::string::npos) << log;
}

TEST(VariantContract, ClassifyReadsMemoryNeedsCanClassify) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    KernelSource k = with_variant_members("plain", DType::bf16, "");
    const std::string flag = "static constexpr bool kClassifyReadsMemory = false;";
    const size_t at = k.source.find(flag);  // the generated flag of a plain spec
    ASSERT_NE(at, std::string::npos);
    k.source.replace(at, flag.size(), "static constexpr bool kClassifyReadsMemory = true;");
    const std::string log = compile_log(k);
    EXPECT_NE(log.find("kClassifyReadsMemory requires kCanClassify"), std::string::npos) << log;
}

}  // namespace
}  // namespace attnjit::codegen
