// The sm90 kernels' bulk-copy descriptors (attnjit::ForwardTmaMaps, forward/tma_maps.h; the
// backward key-tile kernel's attnjit::BackwardTmaMaps, backward/tma_maps.h): one CUtensorMap
// each for Q, K and V (and dO), encoded from checked arguments at every launch (the pointers
// and strides are the call's). The boxes are the kernel's tiles: 64 columns (128 bytes, the
// swizzle span) by block_m rows of Q (and dO) or block_n rows of K and V.
#pragma once

#include <optional>
#include <string>

#include "api/attention.h"
#include "attnjit/common/kernel_config.h"
#include "attnjit/backward/tma_maps.h"
#include "attnjit/forward/tma_maps.h"

namespace attnjit::api {

// Why the bulk copies cannot read Q, K or V as given (null when they can): a stride of 0 over a
// dimension of more than one (a broadcast, which the sm80 loop reads and a tensor map cannot
// describe), or a stride of 2^40 bytes or more. Attention then runs the sm80 kernel.
std::optional<std::string> why_not_tma_readable(const LaunchArgs& args);

// The captured tensor the sm90 forward of `config` copies as its bias tile
// (KernelConfig::bias_tile, codegen::bias_tile_of), or "" when it has none: found once, when the
// kernel is built, and passed to the two calls below at every launch.
std::string tma_bias_tensor(const KernelConfig& config, const AttentionSpec& spec);

// The same as above, and the bias tensor `bias_tensor` too ("" for none): keys contiguous,
// 16-byte aligned rows, every leading dim a whole number of rows apart (a broadcast, stride
// 0, is fine).
std::optional<std::string> why_not_tma_readable(const LaunchArgs& args, const std::string& bias_tensor);

// UserError when the driver cannot describe a tensor all the same, naming it and the way out
// (CompileOptions.mainloop = sm80); EnvironmentError without cuTensorMapEncodeTiled.
ForwardTmaMaps forward_tma_maps(const KernelConfig& config, const LaunchArgs& args, const std::string& bias_tensor);

// The 4-d geometry a tensor map gives t [B, H, N, D] (D contiguous): dims innermost first (D,
// N, H, B) and the byte strides of N, H and B. A dimension of size 1 gets a stride the driver
// accepts (it is never stepped over). An empty tensor (Nq == 0 makes Q and dO empty for the
// backward's key-tile kernels, which still run to write dK = dV = 0 and never read them) is
// described as one row of D: the driver takes no dimension or stride of 0.
struct TmaGeometry {
    unsigned long long dims[4];
    unsigned long long strides[3];
};
TmaGeometry tma_geometry(const TensorView& t, DType dtype);

// The same for dO too: what why_not_tma_readable says of Q, K and V, and of `d_o`.
std::optional<std::string> why_not_tma_readable(const LaunchArgs& args, const TensorView& d_o);
BackwardTmaMaps backward_tma_maps(const KernelConfig& config, const LaunchArgs& args, const TensorView& d_o);

}  // namespace attnjit::api
