#include "runtime/launcher.h"

#include <cmath>
#include <cstring>

#include "attnjit/common/math_constants.h"
#include "attnjit/forward/args.h"
#include "support/error.h"

namespace attnjit::runtime {
namespace {

void strides3(long long out[3], const TensorView& t) {
    for (int d = 0; d < 3; ++d) out[d] = t.strides[d];
}

template <class T>
void put(std::vector<unsigned char>& bytes, const codegen::ParamsField& f, const T& value) {
    internal_check(f.offset >= 0 && f.offset + static_cast<int>(sizeof(T)) <= static_cast<int>(bytes.size()))
        << "params field '" << f.name << "' at offset " << f.offset << " does not fit";
    std::memcpy(bytes.data() + f.offset, &value, sizeof(T));
}

ForwardArgs forward_args(const AttentionSpec& spec, const LaunchArgs& a) {
    ForwardArgs f{};
    f.q = a.q.data;
    f.k = a.k.data;
    f.v = a.v.data;
    f.o = a.o.data;
    f.lse = a.lse ? static_cast<float*>(a.lse->data) : nullptr;
    strides3(f.q_stride, a.q);
    strides3(f.k_stride, a.k);
    strides3(f.v_stride, a.v);
    strides3(f.o_stride, a.o);
    if (a.lse) strides3(f.lse_stride, *a.lse);
    f.batch = static_cast<int>(a.q.shape[0]);
    f.q_heads = static_cast<int>(a.q.shape[1]);
    f.kv_heads = static_cast<int>(a.k.shape[1]);
    f.q_len = static_cast<int>(a.q.shape[2]);
    f.kv_len = static_cast<int>(a.k.shape[2]);
    f.group = f.q_heads / f.kv_heads;
    const double scale = spec.scale_or_default();
    f.scale = static_cast<float>(scale);
    f.scale_log2 = static_cast<float>(scale * kLog2eD);
    return f;
}

}  // namespace

std::vector<unsigned char> pack_params(const codegen::ParamsLayout& layout, const AttentionSpec& spec,
                                       const LaunchArgs& args) {
    std::vector<unsigned char> bytes(layout.size, 0);
    for (const auto& f : layout.fields) {
        using Kind = codegen::ParamsField::Kind;
        switch (f.kind) {
        case Kind::Args: put(bytes, f, forward_args(spec, args)); break;
        case Kind::FloatScalar: put(bytes, f, static_cast<float>(args.scalars.at(f.name))); break;
        case Kind::IntScalar: put(bytes, f, static_cast<int>(args.scalars.at(f.name))); break;
        case Kind::Tensor: {
            const TensorView& t = args.tensors.at(f.name);
            internal_check(f.size == static_cast<int>(8 + 8 * t.strides.size()))
                << "params field '" << f.name << "' has size " << f.size << " for rank " << t.strides.size();
            put(bytes, f, t.data);
            for (size_t d = 0; d < t.strides.size(); ++d) {
                long long s = t.strides[d];
                std::memcpy(bytes.data() + f.offset + 8 + 8 * d, &s, sizeof s);
            }
            break;
        }
        }
    }
    return bytes;
}

Dim3 forward_grid(const KernelConfig& config, const LaunchArgs& a) {
    return Dim3{static_cast<unsigned>(ceil_div(static_cast<int>(a.q.shape[2]), config.tile.block_m)),
                static_cast<unsigned>(a.q.shape[1]), static_cast<unsigned>(a.q.shape[0])};
}

}  // namespace attnjit::runtime
