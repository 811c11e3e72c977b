// The host side of the shared kernel configuration (templates/attnjit/common/kernel_config.h):
// choosing one for a spec and a target, checking it with a user-facing error, printing it.
// Every call site that picks or checks a kernel goes through here, so the rules and their
// error text are written once.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "attnjit/common/kernel_config.h"
#include "dsl/attention_spec.h"
#include "support/dtype.h"

namespace attnjit::codegen {

// The kernels' element type for a Q/K/V dtype: f16, bf16, f32; UserError for any other.
ElemKind elem_kind(DType d);

// "sm_90a" -> 90, "sm_80" -> 80, "sm_100f" -> 100. UserError for anything else (virtual
// compute_XX targets too: they give no cubin).
int sm_version(const std::string& arch);

// attnjit's kernels support sm_80 (Ampere) and newer; this is the one place that says so.
// (The simt main loop's min_sm of 70 only orders the main loops: no attention kernel is
// built for an older arch.) Newer archs that kernel_config.h has no limits for are let
// through: NVRTC and the driver judge them.
inline constexpr int kOldestSupportedSm = 80;
// "sm_80, sm_86, sm_87, sm_89, sm_90 (sm_90a), sm_100, sm_103 and sm_120": the archs whose
// limits kernel_config.h knows, for messages.
std::string known_archs_text();
// sm_version(arch), and UserError naming the supported archs when it is older than
// kOldestSupportedSm. Every attention kernel's configuration goes through it.
int supported_sm_version(const std::string& arch);

// The configuration of a `kind` kernel for `spec` on `arch`: the default main loop for the
// spec's dtype and `tile` (when given) or the default tile. Checked: UserError naming the
// tile, the rule it breaks, and the default to use instead.
// On sm_90a the forward takes the sm90 main loop where it carries the spec; `mainloop` forces a
// loop (UserError where it cannot run the spec).
KernelConfig make_config(const dsl::AttentionSpec& spec, KernelKind kind, const std::string& arch,
                         const std::optional<TileConfig>& tile = std::nullopt,
                         const std::optional<MainloopKind>& mainloop = std::nullopt);

// What an autotuner may try for a `kind` kernel of `spec` on `arch`: make_config's default
// first, then every tile of a fixed candidate space (block_m 16-256, block_n 32-256, 1-16
// warps, 1-4 stages) that make_config accepts, as the configs it makes. Unforced on sm_90a,
// the forward's tiles of 128 rows with 12 warps or 192 with 16 are sm90 configs and the rest
// sm80 ones, so both loops are listed (block_m 192 and block_n 80 or 176 for sm90 only). The
// rules are make_config's and why_config_invalid's (kernel_config.h), the ones NVRTC's
// static_asserts repeat; a tile outside the space may be valid too. UserError when the
// spec cannot run as a `kind` kernel on `arch` at all (what make_config says).
std::vector<KernelConfig> candidate_configs(const dsl::AttentionSpec& spec, KernelKind kind, const std::string& arch,
                                            const std::optional<MainloopKind>& mainloop = std::nullopt);

// Whether `arch` has wgmma and setmaxnreg (the sm90 main loop): sm_90a only.
bool arch_has_wgmma(const std::string& arch);

// UserError unless `config`, valid without its schedule, takes its schedule (why_config_invalid's
// rules: an order on the sm80 and sm90 forward, a grid on the sm90 forward); `what` names where
// the schedule came from ("CompileOptions.schedule").
void check_schedule(const KernelConfig& config, const std::string& what);

// UserError unless `config` is valid and runs on `arch`.
void check_config(const KernelConfig& config, const std::string& arch);

std::string to_string(const TileConfig& t);
// A short identifier for kernel names: "fwd_sm80_bf16_d128x128_m128n64w4s2".
std::string config_id(const KernelConfig& c);

}  // namespace attnjit::codegen

namespace attnjit {  // beside the types, for argument-dependent lookup
// "block_m=128 block_n=64 warps=4 stages=2"
std::ostream& operator<<(std::ostream& os, const TileConfig& t);
// "forward sm80 bf16 d128x128 block_m=128 block_n=64 warps=4 stages=2"; at padded head dims
// "forward sm80 bf16 d40x40 (tiles d64x64) block_m=128 ..."; a chosen schedule last
// ("... stages=2 cta_order=per_head").
std::ostream& operator<<(std::ostream& os, const KernelConfig& c);
// " cta_order=chunked4 grid=persistent"; "" for the kernel's own schedule (printed after a config)
std::ostream& operator<<(std::ostream& os, const CtaSchedule& s);
}  // namespace attnjit
