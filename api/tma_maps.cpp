#include "api/tma_maps.h"

#include <cstring>
#include <initializer_list>
#include <utility>

#include "runtime/cuda_api.h"
#include "support/error.h"

namespace attnjit::api {
namespace {

static_assert(sizeof(TmaMap) == sizeof(CUtensorMap) && alignof(TmaMap) == alignof(CUtensorMap),
              "attnjit::TmaMap must be a CUtensorMap's bytes");

// A 4-d map of t [B, H, N, D] (D contiguous): dims innermost first, byte strides of N, H, B.
// A dimension of size 1 gets a stride the driver accepts (it is never stepped over).
TmaMap encode(const char* name, const TensorView& t, DType dtype, int box_rows) {
    const auto& cu = runtime::cuda();
    environment_check(cu.cuTensorMapEncodeTiled != nullptr)
        << "the sm90 main loop needs cuTensorMapEncodeTiled, which libcuda at " << cu.library
        << " lacks (a driver older than CUDA 12.0); update the driver or pass CompileOptions.mainloop = sm80";
    const cuuint64_t esize = dtype_size(dtype);
    const cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.shape[3]), static_cast<cuuint64_t>(t.shape[2]),
                                static_cast<cuuint64_t>(t.shape[1]), static_cast<cuuint64_t>(t.shape[0])};
    cuuint64_t strides[3];
    cuuint64_t span = dims[0] * esize;  // the extent of the dims inside, for size-1 dims
    for (int d = 0; d < 3; ++d) {
        const int dim = 2 - d;  // N, H, B
        strides[d] = t.shape[dim] == 1 ? (span + 15) / 16 * 16 : static_cast<cuuint64_t>(t.strides[dim]) * esize;
        span = strides[d] * dims[d + 1];
    }
    const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
    const cuuint32_t unit[4] = {1, 1, 1, 1};
    CUtensorMap map;
    const CUresult r = cu.cuTensorMapEncodeTiled(
        &map, dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, t.data,
        dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    user_check(r == CUDA_SUCCESS) << "argument '" << name << "' (shape [" << t.shape[0] << ", " << t.shape[1] << ", "
                                  << t.shape[2] << ", " << t.shape[3] << "], strides [" << t.strides[0] << ", "
                                  << t.strides[1] << ", " << t.strides[2] << ", " << t.strides[3]
                                  << "]) cannot be read by the sm90 main loop's bulk copies ("
                                  << runtime::cu_error_name(r)
                                  << "); pass CompileOptions.mainloop = sm80, or a tensor with positive strides";
    TmaMap out;
    std::memcpy(&out, &map, sizeof map);
    return out;
}

// The first reason the bulk copies cannot read one of `tensors`, by name.
std::optional<std::string> why_not_readable(std::initializer_list<std::pair<const char*, const TensorView*>> tensors) {
    for (const auto& [name, t] : tensors)
        for (int d = 0; d < 3; ++d) {
            if (t->shape[d] <= 1) continue;
            const long long bytes = t->strides[d] * static_cast<long long>(dtype_size(t->dtype));
            if (t->strides[d] == 0)
                return "argument '" + std::string(name) + "' is broadcast (stride 0) over dimension " +
                       std::to_string(d) + ", which a tensor map cannot describe";
            if (bytes >= (1LL << 40))
                return "argument '" + std::string(name) + "' has a stride of " + std::to_string(bytes) +
                       " bytes in dimension " + std::to_string(d) + " (a tensor map takes under 2^40)";
        }
    return std::nullopt;
}

}  // namespace

std::optional<std::string> why_not_tma_readable(const LaunchArgs& args) {
    return why_not_readable({{"q", &args.q}, {"k", &args.k}, {"v", &args.v}});
}

std::optional<std::string> why_not_tma_readable(const LaunchArgs& args, const TensorView& d_o) {
    return why_not_readable({{"q", &args.q}, {"k", &args.k}, {"v", &args.v}, {"d_o", &d_o}});
}

ForwardTmaMaps forward_tma_maps(const KernelConfig& config, const LaunchArgs& args) {
    const DType dtype = args.q.dtype;
    return ForwardTmaMaps{encode("q", args.q, dtype, config.tile.block_m), encode("k", args.k, dtype, config.tile.block_n),
                          encode("v", args.v, dtype, config.tile.block_n)};
}

BackwardTmaMaps backward_tma_maps(const KernelConfig& config, const LaunchArgs& args, const TensorView& d_o) {
    const DType dtype = args.q.dtype;
    return BackwardTmaMaps{encode("q", args.q, dtype, config.tile.block_m), encode("k", args.k, dtype, config.tile.block_n),
                           encode("v", args.v, dtype, config.tile.block_n), encode("d_o", d_o, dtype, config.tile.block_m)};
}

}  // namespace attnjit::api
