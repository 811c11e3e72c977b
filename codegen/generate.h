// generate: KernelPlan + KernelConfig + target arch -> KernelSource, the translation unit
// described in templates/README.md: a provenance comment, the Params struct of the kind
// (emit_params.h), the Variant of hooks (emit_variant.h), and the kind's Traits and
// extern "C" entry (kernel_kinds.h) around the hand-written template.
#pragma once

#include <string>

#include "codegen/kernel_config.h"
#include "codegen/kernel_plan.h"
#include "codegen/kernel_source.h"
#include "dsl/attention_spec.h"

namespace attnjit::codegen {

// From an already lowered plan. The config must be valid on `arch` (UserError naming the
// rule otherwise) and match the spec's dtype and head dims. Deterministic: same inputs,
// same bytes.
KernelSource generate(const KernelPlan& plan, const KernelConfig& config, const std::string& arch);
// The Params layout generate() declares for a plan's `kind` kernel: the one rule the host
// packs by too (api/prepared_kernel.cpp), so the two cannot disagree.
ParamsLayout plan_params_layout(const KernelPlan& plan, KernelKind kind);
// Validates the spec (UserError), checks the config, lowers and renders.
KernelSource generate(const dsl::AttentionSpec& spec, const KernelConfig& config, const std::string& arch);

// What ends the names of a spec's kernels (KernelSource::name, after config_id): the first 12
// hex digits of its hash.
std::string kernel_name_tag(const dsl::AttentionSpec& spec);

}  // namespace attnjit::codegen
