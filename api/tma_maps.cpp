#include "api/tma_maps.h"

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "codegen/bias_tile.h"
#include "runtime/cuda_api.h"
#include "support/error.h"

namespace attnjit::api {
namespace {

static_assert(sizeof(TmaMap) == sizeof(CUtensorMap) && alignof(TmaMap) == alignof(CUtensorMap),
              "attnjit::TmaMap must be a CUtensorMap's bytes");

// One cuTensorMapEncodeTiled call of rank `rank` (dims innermost first, byte strides of the
// outer dims), boxes `box`, 128-byte swizzle, out-of-range elements read as zeros. UserError
// naming `what` (and the way out) when the driver refuses it.
TmaMap encode_tiled(const std::string& what, DType dtype, void* data, unsigned rank, const cuuint64_t* dims,
                    const cuuint64_t* strides, const cuuint32_t* box) {
    const auto& cu = runtime::cuda();
    environment_check(cu.cuTensorMapEncodeTiled != nullptr)
        << "the sm90 main loop needs cuTensorMapEncodeTiled, which libcuda at " << cu.library
        << " lacks (a driver older than CUDA 12.0); update the driver or pass CompileOptions.mainloop = sm80";
    const cuuint32_t unit[4] = {1, 1, 1, 1};
    CUtensorMap map;
    const CUresult r = cu.cuTensorMapEncodeTiled(
        &map, dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank, data,
        dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    user_check(r == CUDA_SUCCESS) << what << " cannot be read by the sm90 main loop's bulk copies ("
                                  << runtime::cu_error_name(r)
                                  << "); pass CompileOptions.mainloop = sm80, or a tensor with positive strides";
    TmaMap out;
    std::memcpy(&out, &map, sizeof map);
    return out;
}

// A 4-d map of t [B, H, N, D] (tma_geometry), in boxes of 64 columns by box_rows rows.
TmaMap encode(const char* name, const TensorView& t, DType dtype, int box_rows) {
    const TmaGeometry g = tma_geometry(t, dtype);
    const cuuint64_t dims[4] = {g.dims[0], g.dims[1], g.dims[2], g.dims[3]};
    const cuuint64_t strides[3] = {g.strides[0], g.strides[1], g.strides[2]};
    const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
    std::ostringstream what;
    what << "argument '" << name << "' (shape [" << t.shape[0] << ", " << t.shape[1] << ", " << t.shape[2] << ", "
         << t.shape[3] << "], strides [" << t.strides[0] << ", " << t.strides[1] << ", " << t.strides[2] << ", "
         << t.strides[3] << "])";
    return encode_tiled(what.str(), dtype, t.data, 4, dims, strides, box);
}

// The largest element offset of t (its strides are not negative).
long long last_offset(const TensorView& t) {
    long long last = 0;
    for (int d = 0; d < t.rank(); ++d) last += (t.shape[d] - 1) * t.strides[d];
    return last;
}

// score_mod's bias tensor t as a 2-d map of its rows (keys innermost; every leading dim folded
// into rows: why_bias_not_readable checked them whole rows), boxes of 64 keys x box_rows.
TmaMap encode_bias(const std::string& name, const TensorView& t, int box_rows) {
    const int r = t.rank();
    const long long row = t.strides[r - 2];
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(t.shape[r - 1]),
                                static_cast<cuuint64_t>(last_offset(t) / row + 1)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row) * dtype_size(t.dtype)};
    const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
    std::ostringstream what;
    what << "captured tensor '" << name << "' (" << t << ")";
    return encode_tiled(what.str(), t.dtype, t.data, 2, dims, strides, box);
}

// Why the bulk copies cannot read score_mod's bias tensor t as rows of keys (null when they can):
// keys contiguous, rows of a multiple of 16 bytes at a 16-byte aligned start, rows not
// overlapping, every other dim a whole number of rows apart, under 2^40 bytes.
std::optional<std::string> why_bias_not_readable(const std::string& name, const TensorView& t) {
    const int r = t.rank();
    const long long esize = static_cast<long long>(dtype_size(t.dtype));
    const long long row = t.strides[r - 2];
    const std::string what = "captured tensor '" + name + "' (the bias tile), ";
    if (t.strides[r - 1] != 1 && t.shape[r - 1] > 1) return what + "its last dim is not contiguous";
    if (row <= 0 || (row * esize) % 16 != 0 || row < t.shape[r - 1])
        return what + "its rows are not whole 16-byte multiples apart (stride " + std::to_string(row) + ")";
    if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0) return what + "its start is not 16-byte aligned";
    for (int d = 0; d < r; ++d) {
        if (t.strides[d] < 0) return what + "a negative stride";
        if (d < r - 2 && t.shape[d] > 1 && t.strides[d] % row != 0)
            return what + "dim " + std::to_string(d) + "'s stride is not a whole number of rows";
    }
    const long long last = last_offset(t);
    if ((last + 1) * esize >= (1LL << 40) || last / row + 1 >= (1LL << 31))
        return what + "it spans 2^40 bytes or 2^31 rows";
    return std::nullopt;
}

// The first reason the bulk copies cannot read one of `tensors`, by name.
std::optional<std::string> why_not_readable(std::initializer_list<std::pair<const char*, const TensorView*>> tensors) {
    for (const auto& [name, t] : tensors)
        for (int d = 0; d < 3 && t->numel() > 0; ++d) {  // an empty tensor is never read (encode)
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

TmaGeometry tma_geometry(const TensorView& t, DType dtype) {
    const unsigned long long esize = dtype_size(dtype);
    const bool empty = t.numel() == 0;
    auto size = [&](int d) { return empty && d != 3 ? 1ULL : static_cast<unsigned long long>(t.shape[d]); };
    TmaGeometry g{{size(3), size(2), size(1), size(0)}, {}};
    unsigned long long span = g.dims[0] * esize;  // the extent of the dims inside, for size-1 dims
    for (int d = 0; d < 3; ++d) {
        const int dim = 2 - d;  // N, H, B
        g.strides[d] = size(dim) == 1 ? (span + 15) / 16 * 16 : static_cast<unsigned long long>(t.strides[dim]) * esize;
        span = g.strides[d] * g.dims[d + 1];
    }
    return g;
}

std::optional<std::string> why_not_tma_readable(const LaunchArgs& args) {
    return why_not_readable({{"q", &args.q}, {"k", &args.k}, {"v", &args.v}});
}

std::optional<std::string> why_not_tma_readable(const LaunchArgs& args, const std::string& bias_tensor) {
    if (auto why = why_not_tma_readable(args)) return why;
    if (bias_tensor.empty()) return std::nullopt;
    return why_bias_not_readable(bias_tensor, args.tensors.at(bias_tensor));
}

std::optional<std::string> why_not_tma_readable(const LaunchArgs& args, const TensorView& d_o) {
    return why_not_readable({{"q", &args.q}, {"k", &args.k}, {"v", &args.v}, {"d_o", &d_o}});
}

ForwardTmaMaps forward_tma_maps(const KernelConfig& config, const LaunchArgs& args, const std::string& bias_tensor) {
    const DType dtype = args.q.dtype;
    ForwardTmaMaps maps{encode("q", args.q, dtype, config.tile.block_m), encode("k", args.k, dtype, config.tile.block_n),
                        encode("v", args.v, dtype, config.tile.block_n), TmaMap{}};
    if (!bias_tensor.empty()) maps.bias = encode_bias(bias_tensor, args.tensors.at(bias_tensor), config.tile.block_m);
    return maps;
}

std::string tma_bias_tensor(const KernelConfig& config, const AttentionSpec& spec) {
    return config.mainloop == MainloopKind::sm90 && config.bias_tile ? codegen::bias_tile_of(spec)->tensor : "";
}

BackwardTmaMaps backward_tma_maps(const KernelConfig& config, const LaunchArgs& args, const TensorView& d_o) {
    const DType dtype = args.q.dtype;
    return BackwardTmaMaps{encode("q", args.q, dtype, config.tile.block_m), encode("k", args.k, dtype, config.tile.block_n),
                           encode("v", args.v, dtype, config.tile.block_n), encode("d_o", d_o, dtype, config.tile.block_m)};
}

}  // namespace attnjit::api
