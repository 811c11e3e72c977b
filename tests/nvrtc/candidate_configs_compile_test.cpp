// The candidate space an autotuner enumerates (codegen::candidate_configs, issue 12) never
// yields a configuration NVRTC refuses: a deterministic sample, spread evenly over each list
// and always with its first (the default) and last entries, of every kernel kind that has a
// tile of its own, at head dims 64 and 128, for sm_80 and sm_90a (where both loops' tiles
// are listed), compiles (the templates' static_asserts repeat the host's rules).
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "codegen/lower.h"
#include "dsl/example_specs.h"
#include "runtime/cuda_api.h"
#include "tests/nvrtc/compile_jobs.h"

namespace attnjit::codegen {
namespace {

// Up to n indices of a list of `size`, evenly spread, with 0 and size - 1.
std::set<size_t> spread(size_t size, size_t n) {
    std::set<size_t> picked;
    if (size == 0) return picked;
    for (size_t i = 0; i < n; ++i) picked.insert(n > 1 ? i * (size - 1) / (n - 1) : 0);
    return picked;
}

TEST(CandidateConfigsCompile, ASampleOfEveryListCompiles) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<CompileJob> jobs;
    for (const char* arch : {"sm_80", "sm_90a"})
        for (int d : {64, 128}) {
            const dsl::AttentionSpec spec = dsl::example_spec("causal", DType::bf16, d).return_lse();
            for (KernelKind kind :
                 {KernelKind::forward, KernelKind::backward_fused, KernelKind::backward_dq, KernelKind::backward_dkdv}) {
                const std::vector<KernelConfig> cs = candidate_configs(spec, kind, arch);
                ASSERT_FALSE(cs.empty()) << kernel_kind_name(kind) << " " << arch;
                for (size_t i : spread(cs.size(), kind == KernelKind::forward ? 5 : 3)) {
                    std::ostringstream what;
                    what << "candidate " << i << " of " << cs.size() << ": " << cs[i] << " on " << arch;
                    jobs.push_back({what.str(), generate(lower(spec, spec_inputs(spec), kind), cs[i], arch), arch});
                }
            }
        }
    EXPECT_GE(jobs.size(), 40u);
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace attnjit::codegen
